"""Fixtures for the training view: real jobs (scripts/), a private report directory, and a monitor over them."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.collect.sampler import SnapshotMaker
from gputop.collect.training import TrainingCollector
from gputop.model import Snapshot, TrainingView
from gputop.run.launch import probe_env
from tests.factories import DEADLINE_S, kill_family, wait_until

SCRIPTS = Path(__file__).parent / "scripts"


@dataclass
class Job:
    """A started script: its process, and the PIDs its ``ready`` line named (itself first)."""

    proc: subprocess.Popen
    pids: list[int]

    @property
    def pid(self) -> int:
        return self.proc.pid


def read_line(proc: subprocess.Popen, prefix: str, timeout_s: float = DEADLINE_S) -> str:
    """The first line of the process's stdout starting with ``prefix``; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"process exited ({proc.wait()}) before printing {prefix!r}")
        if line.startswith(prefix):
            return line.strip()
    pytest.fail(f"no {prefix!r} line within {timeout_s} s")


def run_in_terminal(argv: list[str], env: dict[str, str], keys: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """Run ``argv`` as the session leader of a new terminal; for each (wait_for, key), type ``key`` once the output
    holds ``wait_for`` and every process on the terminal waits (``all_waiting``). Returns the exit status and
    everything written to the terminal."""
    pid, terminal = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    output = b""

    def more(deadline: float) -> bool:
        """Read what the terminal has within the deadline; False once its last process has gone."""
        nonlocal output
        ready, _, _ = select.select([terminal], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(terminal, 1024)
        except OSError:  # EIO: the terminal's last process has gone
            return False
        output += chunk
        return bool(chunk)

    try:
        for wait_for, key in keys:
            deadline = time.monotonic() + DEADLINE_S  # each step has the whole deadline, however slow the last one
            while wait_for not in output and time.monotonic() < deadline:
                if not more(deadline):
                    pytest.fail(f"the terminal closed before {wait_for!r}: {output!r}")
            if wait_for not in output:
                pytest.fail(f"no {wait_for!r} within {DEADLINE_S} s: {output!r}")
            # The key must come after the process that printed wait_for waits for it, and after whatever else on
            # the terminal (gputop beside the job) has done what the output started: once nothing there runs.
            wait_until(lambda: all_waiting(pid), f"every process on the terminal waiting after {wait_for!r}")
            os.write(terminal, key)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and more(deadline):
            pass
    except BaseException:
        for member in session_members(pid):  # a failed test leaves nothing running
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(terminal)
    return os.waitstatus_to_exitcode(status), output


def session_members(session: int) -> dict[int, str]:
    """The processes of ``session`` (a terminal's) and the state of each (``R`` running, ``S`` asleep, ...)."""
    members = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                text = f.read()
        except OSError:  # ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == session:
            members[int(entry.name)] = fields[0]
    return members


def all_waiting(session: int) -> bool:
    """Whether every process of ``session`` is waiting, asleep or stopped: none running on a CPU or in the kernel's
    uninterruptible sleep."""
    states = set(session_members(session).values())
    return bool(states) and not {"R", "D"} & states


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    path = tmp_path / "probe"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def start_job(probe_dir: Path) -> Iterator[Callable[..., Job]]:
    """Start ``scripts/SCRIPT ARGS...`` in its own session (so its whole tree is killed at the end of the test),
    with the probe active unless ``probe=False``; waits for its ``ready`` line."""
    with job_starter(probe_dir) as start:
        yield start


@contextlib.contextmanager
def job_starter(probe_dir: Path) -> Iterator[Callable[..., Job]]:
    """``start_job``'s starter, for a fixture of any scope: each job started is killed, its whole tree, on exit."""
    started: list[subprocess.Popen] = []

    def start(script: str, *args: str, probe: bool = True) -> Job:
        env = probe_env(dict(os.environ), str(probe_dir), "test") if probe else dict(os.environ)
        proc = subprocess.Popen(
            [sys.executable, "-W", "ignore", str(SCRIPTS / script), *args],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        started.append(proc)
        words = read_line(proc, "ready").split()[1:]
        return Job(proc, [int(w) for w in words] or [proc.pid])

    try:
        yield start
    finally:
        for proc in started:
            kill_family(proc.pid)
            proc.wait()
            proc.stdout.close()


@pytest.fixture
def monitor(probe_dir: Path) -> Iterator[Callable[[int], SnapshotMaker]]:
    """A snapshot maker focused on a PID, reading reports from the test's probe directory."""
    made: list[SnapshotMaker] = []

    def make(pid: int) -> SnapshotMaker:
        maker = SnapshotMaker(focus_pid=pid, training=TrainingCollector(probe_dir=str(probe_dir)))
        maker.start()
        made.append(maker)
        return maker

    yield make
    for maker in made:
        maker.close()


def view_when(
    maker: SnapshotMaker, pid: int, condition: Callable[[TrainingView], object], timeout_s: float = DEADLINE_S
) -> TrainingView:
    """Take snapshots (every 0.2 s) until the view of ``pid`` meets ``condition``; return that view."""
    last: list[Snapshot] = []

    def met() -> TrainingView | None:
        last[:] = [maker.snapshot()]
        view = last[0].training_view(pid)
        return view if view is not None and condition(view) else None

    return wait_until(
        met, f"a view of PID {pid} that meets the condition", timeout_s, 0.2, lambda: str(last and last[0].training)
    )


def start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return int(text[text.rindex(")") + 2 :].split()[19])


def report_for(pid: int, **fields: object) -> dict:
    """A well-formed probe report of a live process, as the probe writes it; ``fields`` override its keys."""
    report = {
        "format": "gputop-probe",
        "version": 1,
        "pid": pid,
        "start_ticks": start_ticks(pid),
        "written_at": time.time(),
        "interval_s": 0.5,
        "run_id": None,
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "python": "3.11.7",
        "torch": "2.13.0",
        "failures": 0,
        "last_failure": None,
        "loaders": [],
        "cuda": None,
        "cuda_reason": "CUDA not initialised in this process",
        "cuda_age_s": None,
    }
    report.update(fields)
    return report
