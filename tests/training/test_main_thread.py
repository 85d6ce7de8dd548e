"""Whether the training process's main thread waits or runs, sampled each tick."""

from __future__ import annotations

import time

import pytest

from gputop.model import MAIN_RUNNING, MAIN_WAITING, TrainingView
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
    assert view.main_thread.cpu_percent > 50


def test_the_main_thread_is_measured_apart_from_the_processes_other_threads(spawn, monitor):
    # Two threads spin (a core between them, under the GIL) while the main thread sleeps.
    proc = spawn(SPINNING_THREADS)

    view = after_ticks(monitor(proc.pid), proc.pid)

    assert view.main_thread.activity == MAIN_WAITING
    assert view.main_thread.cpu_percent < 10
    assert view.main_thread.wait_channel is not None
