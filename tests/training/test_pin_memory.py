"""pin_memory on, off or unknown, with the evidence, from the pt_data_pin thread and from the probe."""

from __future__ import annotations

import pytest

from gputop.model import PIN_OFF, PIN_ON, PIN_UNKNOWN
from tests.training.conftest import view_when

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def thread_ids_named(pid: int, name: str) -> set[int]:
    import os

    found = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == name:
                found.add(int(tid))
    return found


def test_a_pt_data_pin_thread_with_workers_means_on(start_job, monitor):
    job = start_job("named_tree.py", "pinned", probe=False)

    view = monitor(job.pid).one_shot().training_view(job.pid)

    (tid,) = thread_ids_named(job.pid, "pt_data_pin")
    assert (view.pin_memory.state, view.pin_memory.source, view.pin_memory.thread_ids) == (PIN_ON, "threads", (tid,))
    assert view.pin_memory.evidence == f"thread pt_data_pin (TID {tid}) in PID {job.pid}"


def test_workers_without_a_pin_thread_mean_off(start_job, monitor):
    job = start_job("named_tree.py", "workers", probe=False)

    view = monitor(job.pid).one_shot().training_view(job.pid)

    assert (view.pin_memory.state, view.pin_memory.evidence) == (PIN_OFF, "2 workers and no pt_data_pin thread")


def test_without_workers_pinning_cannot_be_seen_from_outside(start_job, monitor):
    job = start_job("named_tree.py", "alone", probe=False)

    view = monitor(job.pid).one_shot().training_view(job.pid)

    assert view.pin_memory.state == PIN_UNKNOWN
    assert view.pin_memory.evidence.startswith("no DataLoader workers")


def test_real_dataloader_pin_memory_as_requested_and_as_torch_runs_it(start_job, monitor):
    # A CPU-only torch turns pin_memory off (no accelerator): the probe shows both sides, the view says why.
    job = start_job("train.py", "--workers", "1", "--pin-memory", "--epochs", "0", "--item-s", "0.02", "--persistent")

    view = view_when(monitor(job.pid), job.pid, lambda v: v.loader is not None and v.loader.effective.num_workers)

    loader = view.loader
    assert loader.requested.pin_memory is True
    pinned = loader.effective.pin_memory
    assert view.pin_memory.state == (PIN_ON if pinned else PIN_OFF)
    assert bool(thread_ids_named(job.pid, "pt_data_pin")) == pinned
    if not pinned:
        assert loader.overridden == ("pin_memory",)
        assert "pin_memory=True was requested but torch runs without it" in view.pin_memory.evidence


def test_without_workers_the_probe_tells_whether_batches_are_pinned(start_job, monitor):
    job = start_job("train.py", "--pin-memory", "--epochs", "0", "--step-s", "0.01")

    view = view_when(monitor(job.pid), job.pid, lambda v: v.loader is not None and v.loader.effective.num_workers == 0)

    assert view.pin_memory.source == "probe"
    assert view.pin_memory.state == (PIN_ON if view.loader.effective.pin_memory else PIN_OFF)
    assert view.pin_memory.evidence.startswith(f"probe: pin_memory={view.loader.effective.pin_memory} in effect")
