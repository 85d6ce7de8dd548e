"""A real single-node Slurm (Debian's slurm-wlm 22.05 and munge, installed by scripts/test): munged, slurmctld and
slurmd started once for the module as root, on loopback ports of their own, for one node with two GPUs. A job
submitted with ``sbatch`` appears in ``gputop --once --json`` with its id, step, name, user and GPUs, its process
put on a fake GPU (the fake driver); ``--slurm-job`` shows the job's GPUs first, and refuses a job Slurm does not
know.

Process tracking is ``proctrack/cgroup`` on the cgroup v1 hierarchy (``CgroupPlugin=cgroup/v1``): slurmstepd
moves each step's processes into ``/slurm_<node>/uid_<u>/job_<n>/step_<s>`` of the freezer hierarchy, the path
gputop reads the job from. Slurm's cgroup v2 plugin asks systemd (over D-Bus) for its scope, and there is no
systemd in a container; ``proctrack/linuxproc`` would track the job without a cgroup, leaving gputop nothing to
read. So a machine without a writable cgroup v1 freezer hierarchy (a cgroup v2-only host) cannot run these tests:
the fixture fails, saying so, rather than skipping. The GPUs are ``gres.conf`` entries over empty files
(``ConstrainDevices=no``), which is all Slurm needs to allocate them and name their indices.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.test_cli import driver, gputop  # noqa: F401  (driver: the fixture)
from tests.machines import training_box

DAEMONS = ("munged", "slurmctld", "slurmd")
JOB_USER = "nobody"
FREEZER = Path("/sys/fs/cgroup/freezer")


@dataclass
class Slurm:
    conf: Path
    node: str

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        return {**(base if base is not None else os.environ), "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=30, check=False)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ready: object, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if callable(ready) and ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} did not happen in {deadline_s:g} s")


def _cannot(why: str) -> None:
    pytest.fail(f"a real Slurm cannot start here: {why}", pytrace=False)


@pytest.fixture(scope="module")
def slurm() -> Iterator[Slurm]:
    """munged, slurmctld and slurmd for one node (``gpt<random>``, two GPUs) in a private directory."""
    if os.geteuid() != 0:
        _cannot("slurmd and slurmstepd must run as root (scripts/test runs the suite as root)")
    missing = [d for d in (*DAEMONS, "sbatch", "scontrol") if shutil.which(d) is None]
    if missing:
        _cannot(f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge)")
    if not os.access(FREEZER, os.W_OK):
        _cannot(f"no writable cgroup v1 freezer hierarchy at {FREEZER} for proctrack/cgroup")
    # Not below pytest's temporary directory, which only root may enter: the job's user runs its script from the
    # spool directory.
    root = Path(tempfile.mkdtemp(prefix="gputop-slurm-"))
    root.chmod(0o755)
    node = f"gpt{uuid.uuid4().hex[:8]}"
    for sub in ("state", "spool", "log", "run", "munge", "dev"):
        (root / sub).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    for gpu in (0, 1):
        (root / "dev" / f"nvidia{gpu}").touch()
    (root / "slurm.conf").write_text(
        f"""ClusterName=gputest
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/sock
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
GresTypes=gpu
ReturnToService=2
MpiDefault=none
DefMemPerNode=1
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=100 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""
    )
    (root / "cgroup.conf").write_text(
        "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainDevices=no\nConstrainCores=no\n"
    )
    (root / "gres.conf").write_text(f"NodeName={node} Name=gpu File={root}/dev/nvidia[0-1]\n")
    conf = root / "slurm.conf"
    here = Slurm(conf, node)
    env = here.env()
    started: list[Path] = []
    try:
        munge = ["munged", "-f", f"--socket={root}/munge/sock", f"--key-file={key}"]
        munge += [f"--log-file={root}/log/munged.log", f"--pid-file={root}/run/munged.pid"]
        subprocess.run([*munge, f"--seed-file={root}/munge/seed"], check=True, env=env, timeout=30)
        started.append(root / "run" / "munged.pid")
        subprocess.run(["slurmctld", "-f", str(conf), "-c", "-i"], check=True, env=env, timeout=30)
        started.append(root / "run" / "slurmctld.pid")
        subprocess.run(["slurmd", "-f", str(conf), "-N", node], check=True, env=env, timeout=30)
        started.append(root / "run" / "slurmd.pid")

        def idle() -> bool:
            out = subprocess.run(
                ["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True, env=env, check=False
            )
            return out.stdout.strip() == "idle"

        _wait("the node coming up idle", idle)
        yield here
    finally:
        for pid_file in reversed(started):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), 9)
        cgroups = sorted(FREEZER.glob(f"slurm_{node}/**/"), key=lambda p: -len(p.parts))
        for cgroup in cgroups:  # the steps' processes, slurmstepd gone with slurmd
            for pid in (cgroup / "cgroup.procs").read_text().split() if (cgroup / "cgroup.procs").exists() else ():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), 9)
        for cgroup in cgroups:
            for _ in range(50):  # a killed process leaves its cgroup a moment after the signal
                try:
                    cgroup.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)


def _submit(slurm: Slurm, name: str, gpus: int) -> tuple[str, int]:
    """A batch job of ``JOB_USER`` sleeping, holding ``gpus``; its id and the PID of its sleep."""
    job = slurm.run(
        "sbatch", "--parsable", f"--uid={JOB_USER}", "-J", name, f"--gres=gpu:{gpus}", "-D", "/tmp",
        "-o", "/dev/null", "--wrap", "exec sleep 300",
    ).strip()  # fmt: skip
    found: list[int] = []

    def running() -> bool:
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    text = (proc / "cgroup").read_text()
                    command = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if f"/job_{job}/" in text and command.startswith(b"sleep\0"):
                    found.append(int(proc.name))
                    return True
        return False

    _wait(f"job {job}'s sleep starting", running)
    return job, found[0]


@pytest.fixture(scope="module")
def job(slurm: Slurm) -> Iterator[tuple[str, int]]:
    submitted = _submit(slurm, "train resnet", 1)
    yield submitted
    subprocess.run(["scancel", submitted[0]], env=slurm.env(), check=False, timeout=30)


def test_a_batch_job_s_process_shows_its_job_step_name_user_and_gpus(slurm, job, driver):  # noqa: F811
    job_id, pid = job
    driver.write(training_box(2, [pid]))

    result = gputop("--once", "--json", env=slurm.env(driver.env()))

    assert result.returncode == 0, result.stderr
    [row] = [row for row in json.loads(result.stdout)["processes"] if row["pid"] == pid]
    assert row["container"]["runtime"] == "slurm"
    assert row["slurm"] == {
        "id": job_id,
        "step": "batch",
        "name": "train resnet",
        "user": JOB_USER,
        "state": "RUNNING",
        "gpus": [0],
    }


def test_slurm_job_option_puts_the_job_s_gpus_first_and_says_so(slurm, job, driver):  # noqa: F811
    job_id, pid = _submit(slurm, "second", 1)  # GPU 0 is the first job's: this one has GPU 1
    try:
        driver.write(training_box(2, [pid]))
        result = gputop("--once", "--slurm-job", job_id, env=slurm.env(driver.env()))
    finally:
        subprocess.run(["scancel", job_id], env=slurm.env(), check=False, timeout=30)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"slurm job {job_id} (second): its GPUs 1 first (scontrol)"


def test_slurm_job_option_refuses_a_job_slurm_does_not_know_in_one_line(slurm, driver):  # noqa: F811
    result = gputop("--once", "--slurm-job", "999999", env=slurm.env(driver.env()))

    assert result.returncode == 2
    assert result.stderr == "gputop: error: --slurm-job 999999: no such job in Slurm (ended?)\n"
