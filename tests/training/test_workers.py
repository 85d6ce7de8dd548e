"""DataLoader workers of real torch jobs, found from outside for each start method."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.training.conftest import Job, job_starter, view_when

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Workers that stay a while: each sample takes 20 ms, the loop runs until killed.
SLOW_LOOP = ("--workers", "2", "--epochs", "0", "--batches", "50", "--item-s", "0.02", "--persistent")


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report directory for the module's jobs (each report is named by its PID), so that one job can serve
    several tests."""
    path = tmp_path_factory.mktemp("workers") / "probe"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture(scope="module")
def fork_job(probe_dir: Path) -> Iterator[Job]:
    """The slow loop with fork workers, started once for the tests that only look at it (a torch start each)."""
    with job_starter(probe_dir) as start:
        yield start("train.py", *SLOW_LOOP, "--start-method", "fork")


def real_workers(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True) if p.name() == "pt_data_worker"}


def two_workers(view) -> bool:
    return len(view.workers) == 2 and all(w.host.cpu_percent is not None for w in view.workers)


def two_named(pid: int):
    """Two workers in the view, and two that have taken torch's name for a worker: a worker takes it once its loop
    starts, which on a busy machine can be after gputop has found it (by its parent, or the fork server's)."""
    return lambda view: two_workers(view) and len(real_workers(pid)) == 2


def test_spawn_workers_are_found_and_named_by_their_start_method(start_job, monitor):
    job = start_job("train.py", *SLOW_LOOP, "--start-method", "spawn")

    # A spawned worker is a fresh interpreter: it takes torch's name for a worker only once it has imported torch,
    # which on a busy machine is well after gputop has found it.
    view = view_when(monitor(job.pid), job.pid, two_named(job.pid))

    assert {w.pid for w in view.workers} == real_workers(job.pid)
    assert view.worker_start_method == "spawn"


def test_forkserver_workers_sit_under_the_fork_server_but_belong_to_the_job(start_job, monitor):
    job = start_job("train.py", *SLOW_LOOP, "--start-method", "forkserver")

    view = view_when(monitor(job.pid), job.pid, two_named(job.pid))

    assert {w.pid for w in view.workers} == real_workers(job.pid)
    (fork_server,) = {w.host.ppid for w in view.workers}
    assert fork_server != job.pid
    assert psutil.Process(fork_server).ppid() == job.pid
    assert view.worker_start_method == "forkserver"
    assert [v.pid for v in monitor(job.pid).snapshot().training] == [job.pid]  # the fork server is no job


def test_workers_replaced_every_epoch_without_persistent_workers(start_job, monitor):
    # Epochs of about 0.6 s: 4 batches of 4 samples at 20 ms on 2 workers.
    job = start_job("train.py", "--workers", "2", "--epochs", "0", "--batches", "4", "--item-s", "0.02")

    view = view_when(monitor(job.pid), job.pid, lambda v: v.workers_replaced >= 2)

    assert view.loader is None or view.loader.effective.persistent_workers is False


def test_persistent_workers_are_never_replaced(start_job, monitor):
    job = start_job("train.py", "--workers", "2", "--epochs", "0", "--batches", "4", "--item-s", "0.02", "--persistent")
    maker = monitor(job.pid)

    view = view_when(maker, job.pid, lambda v: v.probe.ok and v.loader.passes >= 4 and len(v.workers) == 2)

    assert view.workers_replaced == 0
    assert {w.pid for w in view.workers} == real_workers(job.pid)


# -- the fork job, started once for these (last, so it runs beside no other test's job) --------------------------


def test_fork_workers_are_the_training_processes_children(fork_job, monitor):
    job = fork_job

    view = view_when(monitor(job.pid), job.pid, two_named(job.pid))

    assert {w.pid for w in view.workers} == real_workers(job.pid)
    assert {w.host.ppid for w in view.workers} == {job.pid}
    assert view.worker_start_method == "fork"


def test_each_worker_has_its_own_memory_age_and_state(fork_job, monitor):
    job = fork_job

    view = view_when(monitor(job.pid), job.pid, two_workers)

    for worker in view.workers:
        real = psutil.Process(worker.pid)
        assert worker.host.rss_bytes == pytest.approx(real.memory_info().rss, rel=0.2)
        assert 0 < worker.uss_bytes < worker.host.rss_bytes  # a forked worker shares most of its pages
        assert worker.uss_bytes == pytest.approx(real.memory_full_info().uss, rel=0.3)
        assert worker.host.status in ("running", "sleeping")
        assert 0 <= worker.age_s <= time.time() - real.create_time() + 1  # the job is shared: as old as it is
        assert worker.host.cpu_percent >= 0
    assert view.workers_cpu_percent == pytest.approx(sum(w.host.cpu_percent for w in view.workers), abs=0.2)
    assert view.usable_cpu_count == len(psutil.Process(job.pid).cpu_affinity())


def test_probe_names_each_workers_index_in_the_loader(fork_job, monitor):
    job = fork_job

    view = view_when(
        monitor(job.pid), job.pid, lambda v: two_workers(v) and v.loader and len(v.loader.worker_pids) == 2
    )

    loader = view.loader
    assert sorted(w.worker_id for w in view.workers) == [0, 1]
    assert {w.pid: w.worker_id for w in view.workers} == {pid: i for i, pid in enumerate(loader.worker_pids)}
