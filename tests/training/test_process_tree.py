"""Which processes are training processes, and whose workers are whose, in the shapes real jobs take."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from gputop.collect.sampler import SnapshotMaker
from gputop.collect.training import TrainingCollector
from gputop.model import PROBE_OK, ROLE_TORCHRUN_AGENT, ROLE_TRAINING
from tests.factories import wait_until
from tests.machines import GIB, training_box
from tests.training.conftest import SCRIPTS, read_line, report_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_torchrun_agent_lists_its_ranks_and_each_rank_owns_its_workers(start_job, monitor):
    job = start_job("named_tree.py", "torchrun", probe=False)
    agent, rank_a, w1, w2, rank_b, w3, w4 = job.pids

    snap = monitor(agent).one_shot()

    assert [v.pid for v in snap.training] == [agent, rank_a, rank_b]
    agent_view = snap.training_view(agent)
    assert (agent_view.role, agent_view.name, agent_view.ranks, agent_view.workers) == (
        ROLE_TORCHRUN_AGENT,
        "pt_elastic",
        (rank_a, rank_b),
        (),
    )
    for rank, workers in ((rank_a, {w1, w2}), (rank_b, {w3, w4})):
        view = snap.training_view(rank)
        assert (view.role, view.name) == (ROLE_TRAINING, "pt_main_thread")
        assert {w.pid for w in view.workers} == workers
        assert all(w.host is snap.host_process(w.pid) for w in view.workers)


def test_workers_below_a_wrapper_shell_belong_to_the_process_that_started_them(monitor):
    # `sh -c "...; :"` cannot exec its last command, so sh stays the parent of the python job.
    shell = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} {SCRIPTS / 'named_tree.py'} workers; :"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        job, w1, w2 = (int(w) for w in read_line(shell, "ready").split()[1:])

        snap = monitor(shell.pid).one_shot()

        assert [v.pid for v in snap.training] == [shell.pid, job]
        assert snap.training_view(shell.pid).ranks == (job,)
        assert snap.training_view(shell.pid).workers == ()
        assert {w.pid for w in snap.training_view(job).workers} == {w1, w2}
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
        shell.stdout.close()


def test_every_gpu_process_gets_a_view_without_a_focus(start_job, fake_driver, probe_dir):
    job = start_job("named_tree.py", "torchrun", probe=False)
    agent, rank_a, _, _, rank_b, _, _ = job.pids
    fake_driver(training_box(2, [rank_a, rank_b]))
    maker = SnapshotMaker(training=TrainingCollector(probe_dir=str(probe_dir)))
    try:
        snap = maker.one_shot()
    finally:
        maker.close()

    assert [v.pid for v in snap.training] == [rank_a, rank_b]
    assert all(len(v.workers) == 2 for v in snap.training)
    assert agent not in {v.pid for v in snap.training}


def test_torch_memory_is_joined_to_the_nvml_gpu_by_uuid(start_job, fake_driver, probe_dir):
    job = start_job("named_tree.py", "alone", probe=False)
    fake_driver(training_box(2, [job.pid]))  # GPU 0, 6 GiB in NVML's eyes
    device = {
        "device": 0,
        "uuid": "6a1b2c3d-0000-4000-8000-000000000000",  # torch prints the UUID without NVML's "GPU-"
        "allocated_bytes": 3 * GIB,
        "reserved_bytes": 4 * GIB,
        "active_bytes": 3 * GIB,
        "inactive_split_bytes": 10_000_000,
        "allocated_peak_bytes": 5 * GIB,
        "reserved_peak_bytes": 5 * GIB,
        "num_alloc_retries": 2,
        "num_ooms": 0,
        "num_device_alloc": 40,
        "num_device_free": 12,
    }
    cuda = {"devices": [device], "host_pinned": {"allocated_bytes": 64 * 1024**2, "num_host_alloc": 3}}
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(report_for(job.pid, cuda=cuda, cuda_reason=None)))
    maker = SnapshotMaker(focus_pid=job.pid, training=TrainingCollector(probe_dir=str(probe_dir)))
    try:
        view = maker.one_shot().training_view(job.pid)
    finally:
        maker.close()

    assert view.probe.status == PROBE_OK
    (memory,) = view.probe.cuda
    assert (memory.gpu_index, memory.nvml_process_bytes) == (0, 6 * GIB)
    assert (memory.allocated_bytes, memory.reserved_bytes, memory.num_alloc_retries) == (3 * GIB, 4 * GIB, 2)
    assert view.probe.pinned_host.allocated_bytes == 64 * 1024**2
    assert view.probe.pinned_host.num_host_free is None  # not in the report: unknown, not zero


def test_a_process_that_exits_leaves_the_training_view(start_job, monitor):
    job = start_job("named_tree.py", "workers", probe=False)
    maker = monitor(job.pid)
    assert maker.one_shot().training_view(job.pid) is not None

    job.proc.kill()
    job.proc.wait()

    wait_until(lambda: maker.snapshot().training_view(job.pid) is None)
