"""``gputop demo``: the bundled training job, the real command in a real terminal (tmux), headless, and without
torch. No fake driver: the demo is what a newcomer sees on a machine without a GPU."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop.demo import NEEDS_TORCH, NOTICE
from gputop.run.launch import stop
from tests.factories import DEADLINE_S
from tests.ui.test_tmux import Tmux, gputop_command

FINDING = re.compile(r"Input-bound: the loop waits for data (\d+)% of each step")
WORKERS = re.compile(r"WORKERS\s+2 \((\w+)\)\s+\S+ (\d+\.\d) of (\d+) cores")
JOB = re.compile(r"Training · PID (\d+)")


def demo_env(tmp_path: Path) -> dict[str, str]:
    """This environment with a private probe directory, so reports from other tests never mix in."""
    probe = tmp_path / "probe"
    probe.mkdir(mode=0o700, exist_ok=True)
    return {**os.environ, "GPUTOP_PROBE_DIR": str(probe)}


def data_workers(pid: int) -> list[psutil.Process]:
    """The DataLoader workers below ``pid`` (children, or with forkserver the fork server's)."""
    return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "pt_data_worker"]


def ended(processes: list[psutil.Process], timeout_s: float = DEADLINE_S) -> bool:
    """Whether every one of ``processes`` is gone (or a zombie, left for its parent to reap) within ``timeout_s``."""

    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout_s
    while any(map(running, processes)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    server = Tmux(tmp_path / "tmux.sock")
    yield server
    # A test that failed midway leaves gputop and the job running: end them first, by PID, below the pane's
    # shell (a gputop that loses its terminal does not exit by itself: the hangup goes to the job).
    panes = subprocess.run(
        ["tmux", "-S", str(server.socket), "list-panes", "-a", "-F", "#{pane_pid}"], capture_output=True, text=True
    )
    for pid in map(int, panes.stdout.split()):
        with contextlib.suppress(psutil.NoSuchProcess):
            for process in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
    subprocess.run(["tmux", "-S", str(server.socket), "kill-server"], capture_output=True)


def test_demo_in_tmux_shows_the_workers_and_a_finding_and_q_stops_the_job(tmp_path: Path, tmux: Tmux) -> None:
    status = tmp_path / "exit-status"
    tmux.start_gputop("demo", env={"GPUTOP_PROBE_DIR": demo_env(tmp_path)["GPUTOP_PROBE_DIR"]}, status=status)

    screen = tmux.wait_for(NOTICE)
    # The training panel, with both DataLoader workers as gputop sees them from outside: their count and CPU.
    screen = tmux.wait_until(lambda s: WORKERS.search(s) is not None, "the DataLoader workers")
    job = int(JOB.search(screen)[1])
    workers = data_workers(job)
    processes = [psutil.Process(job), *workers]
    assert len(workers) == 2
    rows = [re.compile(rf"^│\s+{worker.pid}\s+\d\s+[a-z ]+\s+\S+\s+\d+%", re.MULTILINE) for worker in workers]
    screen = tmux.wait_until(  # a busy machine may draw the panel over more than one frame
        lambda s: all(row.search(s) for row in rows) and "probe ok" in s, "both workers' rows"
    )
    assert re.search(r"DATA WAIT .* \d+% of the step time", screen)

    # The advisor's finding, from what it measured: a data wait above the rule's 10 % threshold.
    screen = tmux.wait_until(lambda s: FINDING.search(s) is not None, "the advisor's finding")
    assert int(FINDING.search(screen)[1]) >= 10
    assert re.search(r"Advice · \d+ findings?", screen)

    tmux.run("send-keys", "-t", "gputop", "q")
    assert tmux.exit_status(status) == "0", tmux.screen()
    assert f"dashboard closed; stopping PID {job}" in tmux.screen()
    assert ended(processes)


def test_demo_headless_prints_the_advisors_finding_when_the_job_ends(tmp_path: Path) -> None:
    result = subprocess.run(
        [*gputop_command(), "demo", "--headless", "--seconds", "14", "--window", "4"],
        env=demo_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )

    assert result.returncode == 0, result.stderr
    # The job's own output keeps the terminal, from its first line to its last (whether a whole epoch of 100
    # batches fits in 14 s depends on the machine's load).
    assert "2 DataLoader workers" in result.stdout
    assert re.search(r"^time limit reached \(14 s\) after \d+ epochs?$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"gputop: PID \d+ up \d+s \| batch 64 \| data wait \d+% .*\| 2 workers", result.stderr)
    findings = result.stderr.split("advisor findings for PID", 1)[1]
    assert "data-starved" in findings, result.stderr
    assert int(FINDING.search(findings)[1]) >= 10


def test_the_job_stops_cleanly_on_sigterm_with_its_workers(tmp_path: Path) -> None:
    job = subprocess.Popen(
        [sys.executable, "-m", "gputop.demo.job", "--epoch-batches", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert job.stdout.readline().startswith(f"gputop demo job (PID {job.pid}): 2 DataLoader workers")
        assert job.stdout.readline().startswith("epoch 1: loss ")
        workers = data_workers(job.pid)
        assert len(workers) == 2
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=DEADLINE_S) == 0
        assert job.stdout.read().splitlines()[-1].startswith("stopped in epoch ")
        assert ended(workers)
    finally:
        job.kill()
        job.wait()


def test_stop_escalates_to_sigkill_for_a_command_that_ignores_sigint_and_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    started = time.monotonic()

    stop(child, grace_s=0.3)

    assert child.returncode == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5


def test_without_torch_it_says_how_to_install_it(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch (a stand-in for a missing torch)')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(fake.parent), env.get("PYTHONPATH")]))

    result = subprocess.run(
        [*gputop_command(), "demo"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 1
    assert result.stderr == f"gputop: error: {NEEDS_TORCH}\n"
    assert 'pip install "gputop-ml[torch]"' in result.stderr
    assert result.stdout == ""
