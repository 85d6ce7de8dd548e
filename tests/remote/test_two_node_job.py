"""A two-node torchrun job: two launchers on loopback, each a "node" behind its own real sshd with its own fake
driver, their ranks rendezvousing at one master. Each host's gputop, over ssh, sees its own node's rank; the
hosts view shows them as one job of two ranks on two hosts."""

from __future__ import annotations

import contextlib
import getpass
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop.remote.fleet import Fleet
from gputop.remote.hostspec import HostSpec
from gputop.ui.hosts.app import hosts_app
from gputop.ui.hosts.section import HostJobs
from tests.factories import kill_family, settle, wait_until
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import h100
from tests.remote.conftest import GPUTOP, SshLab
from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GIB = 1 << 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def two_node_job(tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    """Two torchrun launchers, node ranks 0 and 1, one rank each, rendezvousing on a loopback port."""
    port = free_port()
    launchers = []
    for node in (0, 1):
        argv = [sys.executable, "-W", "ignore", "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}"]
        argv += ["--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}"]
        argv += [str(SCRIPTS / "ddp.py"), "--seconds", "120", "--workers", "1", "--work", "4", "--step-s", "0.02"]
        log = (tmp_path / f"node{node}.log").open("w")
        launchers.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True, cwd=tmp_path))
    try:
        yield launchers
    finally:
        for launcher in launchers:
            kill_family(launcher.pid)
            launcher.wait(timeout=10)


def rank_of(launcher: subprocess.Popen) -> int | None:
    """The PID of the launcher's rank: its child running ddp.py."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(launcher.pid).children():
            if "ddp.py" in " ".join(child.cmdline()):
                return child.pid
    return None


async def test_a_job_on_two_nodes_is_one_job_of_two_ranks_in_the_hosts_view(ssh_lab: SshLab, two_node_job) -> None:
    wait_until(lambda: all(rank_of(launcher) for launcher in two_node_job), timeout_s=60)
    for name, launcher in zip(("node-a", "node-b"), two_node_job):
        rank = rank_of(launcher)
        assert rank is not None
        gpu = h100(0, util_gpu=60, processes=[FakeProcess(rank, 3 * GIB)])
        ssh_lab.add(name, FakeState(gpus=[gpu]))
    fleet = Fleet([HostSpec("node-a", str(GPUTOP)), HostSpec("node-b", str(GPUTOP))], 0.5, ssh_lab.ssh_command)
    app = hosts_app(fleet, interval_s=0.5)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            jobs = app.screen.query_one(HostJobs)
            await settle(pilot, lambda: jobs.jobs, "the job from both hosts")
            (job,) = jobs.jobs
            assert job.kind == "torchrun" and job.world_size == 2
            assert [(r.rank, r.host) for r in job.ranks] == [(0, "node-a"), (1, "node-b")]
            assert [r.pid for r in job.ranks] == [rank_of(launcher) for launcher in two_node_job]
            (line,) = [line.plain for line in jobs.text_lines(150)]
            assert line.startswith(
                f"JOB {job.id}  torchrun  user {getpass.getuser()}  2 ranks on node-a (1), node-b (1)"
            )
    finally:
        fleet.stop()
