"""Another local user's process cannot join one's training job: it may copy the job's launcher variables
(``RANK=1`` and the run id of root's job), but ranks are grouped only with ranks of the same user.

Real processes of root and of the second user, with those variables in their environment, read by the real
collectors over the fake driver, which lists both as GPU processes.
"""

from __future__ import annotations

import getpass
import os
import subprocess
from collections.abc import Callable, Iterator

import pytest

from gputop.collect.sampler import SnapshotMaker
from gputop.jobs import JOB_TORCHRUN, find_jobs
from tests.machines import training_box
from tests.security.conftest import LocalUser

SLEEP = ["sleep", "300"]  # a program the second user can run (the test interpreter may be under /root)


def launched(rank: int) -> dict[str, str]:
    """What torchrun puts in the environment of rank ``rank`` of root's two-rank job."""
    return {
        **os.environ,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": "root-run-42",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_another_users_process_with_the_jobs_launcher_variables_is_not_one_of_its_ranks(
    other_user: LocalUser, fake_driver: Callable[..., object], started: list[subprocess.Popen]
) -> None:
    rank0 = subprocess.Popen(SLEEP, env=launched(0))
    started.append(rank0)
    intruder = other_user.popen(SLEEP, env=launched(1))
    started.append(intruder)
    fake_driver(training_box(2, [rank0.pid, intruder.pid]))
    maker = SnapshotMaker()
    try:
        snap = maker.one_shot()
    finally:
        maker.close()

    jobs = {job.user: job for job in find_jobs(snap)}

    assert sorted(job.pids for job in jobs.values()) == sorted([(rank0.pid,), (intruder.pid,)])
    assert set(jobs) == {getpass.getuser(), other_user.name}
    mine, theirs = jobs[getpass.getuser()], jobs[other_user.name]
    assert mine.pids == (rank0.pid,) and theirs.pids == (intruder.pid,)
    assert mine.kind == theirs.kind == JOB_TORCHRUN
    assert mine.id != theirs.id
