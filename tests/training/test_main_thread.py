"""Whether the training process's main thread waits or runs, sampled each tick."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from gputop.model import MAIN_RUNNING, MAIN_WAITING, TrainingView
from tests.factories import wait_until
from tests.training.conftest import view_when

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPINNING_THREADS = """
import threading, time
def spin():
    while True:
        pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(300)
"""


def pinned(code: str, cpu: int) -> str:
    """``code`` run on one CPU only."""
    return f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n{code}"


def after_ticks(maker, pid: int, ticks: int = 4, every_s: float = 0.25) -> TrainingView:
    """The view of ``pid`` after a few ticks, so the busy share covers several of them."""
    for _ in range(ticks):
        view = maker.snapshot().training_view(pid)
        time.sleep(every_s)
    return view


def test_a_loop_starved_by_slow_workers_is_waiting_in_poll_or_futex(start_job, monitor):
    job = start_job("train.py", "--workers", "1", "--epochs", "0", "--item-s", "0.05", "--persistent")
    maker = monitor(job.pid)

    after_ticks(maker, job.pid)
    view = view_when(maker, job.pid, lambda v: v.main_thread.wait_channel is not None)

    assert view.main_thread.activity == MAIN_WAITING
    assert view.main_thread.busy_share < 0.25
    assert view.main_thread.status == "sleeping"
    assert any(word in view.main_thread.wait_channel for word in ("poll", "futex", "select"))


def test_a_busy_loop_is_running(spawn, monitor):
    proc = spawn("while True: pass")

    view = after_ticks(monitor(proc.pid), proc.pid)

    assert view.main_thread.activity == MAIN_RUNNING
    assert view.main_thread.busy_share > 0.75
    assert view.main_thread.cpu_percent > 0


def test_a_busy_loop_that_waits_for_a_cpu_held_by_others_is_still_running(spawn, monitor):
    # Three other busy processes on the loop's one CPU: it gets a quarter of it, and is runnable all the time.
    cpu = min(os.sched_getaffinity(0))
    for _ in range(3):
        spawn(pinned("while True: pass", cpu))
    proc = spawn(pinned("while True: pass", cpu))

    view = after_ticks(monitor(proc.pid), proc.pid)

    assert view.main_thread.cpu_percent < 50, "the loop gets a share of its CPU"
    assert view.main_thread.activity == MAIN_RUNNING
    assert view.main_thread.busy_share > 0.75


def test_the_main_thread_is_measured_apart_from_the_processes_other_threads(spawn, monitor):
    # Two threads spin (a core between them, under the GIL) while the main thread sleeps.
    proc = spawn(SPINNING_THREADS)
    # Watched once both threads run: before that, the main thread is starting the interpreter and them.
    wait_until(lambda: psutil.Process(proc.pid).num_threads() == 3, "the two spinning threads", timeout_s=60)

    view = after_ticks(monitor(proc.pid), proc.pid)

    assert view.main_thread.activity == MAIN_WAITING
    assert view.main_thread.cpu_percent < 10
    assert view.main_thread.wait_channel is not None
