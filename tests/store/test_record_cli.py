"""``gputop record`` in a subprocess over the fake driver: duration, SIGTERM, SIGKILL and bad input."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time

import pytest

from gputop.store import open_recording
from tests.conftest import FakeDriver
from tests.factories import wait_until
from tests.machines import training_box

FLUSH_EVERY_S = 2.0


def gputop(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gputop", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture
def driver(tmp_path) -> FakeDriver:
    return FakeDriver(tmp_path / "state.txt", "r550")


def committed(path) -> int:
    if not path.exists():
        return 0
    try:
        with open_recording(path) as recording:
            return recording.count()
    except Exception:
        return 0


def test_record_for_a_duration_writes_every_snapshot_and_exits_0(driver, spawn, tmp_path):
    proc = spawn()
    driver.write(training_box(2, [proc.pid]))
    path = tmp_path / "run.gputop"

    run = gputop("record", "-o", str(path), "-d", "0.2", "--duration", "1.5", "--pid", str(proc.pid), env=driver.env())
    out, err = run.communicate(timeout=30)

    assert run.returncode == 0, err
    assert out == ""
    with open_recording(path) as recording:
        snaps = list(recording)
        assert recording.info.interval_s == 0.2
    assert 4 <= len(snaps) <= 9
    assert all(s.focus_pid == proc.pid and len(s.gpus) == 2 for s in snaps)
    assert [p.pid for p in snaps[-1].processes] == [proc.pid]
    assert [s.time for s in snaps] == sorted(s.time for s in snaps)
    assert f"recorded {len(snaps)} snapshots" in err


def record_until_sigterm(driver: FakeDriver, path, interval_s: float, signum: int = signal.SIGTERM) -> tuple[int, str]:
    """``gputop record`` every ``interval_s``, sent SIGTERM (or ``signum``) once its first snapshot is committed:
    exit code, stderr.
    A run still there 15 s after SIGTERM is aborted, and the test fails with where each of its threads was (Python's
    fault handler, on for this run, prints them on SIGABRT)."""
    driver.write(training_box(1, []))
    run = gputop("record", "-o", str(path), "-d", str(interval_s), env={**driver.env(), "PYTHONFAULTHANDLER": "1"})
    wait_until(lambda: committed(path) > 0)
    run.send_signal(signum)
    try:
        _, err = run.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        run.send_signal(signal.SIGABRT)
        _, err = run.communicate(timeout=15)
        pytest.fail(f"gputop record was still running 15 s after SIGTERM; its threads then:\n{err}")
    return run.returncode, err


def test_sigterm_commits_what_is_pending_and_exits_0(driver, tmp_path):
    path = tmp_path / "run.gputop"

    code, err = record_until_sigterm(driver, path, 0.1)

    assert code == 0, err
    with open_recording(path) as recording:
        snaps = list(recording)
    assert f"recorded {len(snaps)} snapshots" in err


def test_ctrl_c_commits_what_is_pending_and_exits_0(driver, tmp_path):
    path = tmp_path / "run.gputop"

    code, err = record_until_sigterm(driver, path, 0.1, signal.SIGINT)

    assert code == 0, err
    assert "Traceback" not in err
    with open_recording(path) as recording:
        snaps = list(recording)
        assert recording.info.ended is not None
    assert f"recorded {len(snaps)} snapshots" in err


def test_sigkill_loses_at_most_the_last_flush_interval(driver, tmp_path):
    driver.write(training_box(1, []))
    path = tmp_path / "run.gputop"
    run = gputop("record", "-o", str(path), "-d", "0.1", env=driver.env())
    try:
        wait_until(lambda: committed(path) > 0)
        time.sleep(FLUSH_EVERY_S + 0.7)  # at least one more commit
        killed_at = time.time()
        run.kill()
    finally:
        run.kill()
        run.wait(timeout=10)

    with open_recording(path) as recording:
        times = [s.time for s in recording]
        assert recording.damage is None
    assert len(times) >= 10
    assert killed_at - times[-1] <= FLUSH_EVERY_S + 0.1 + 1.0  # one flush interval, one tick, and slack
    assert all(b - a < 1.0 for a, b in itertools.pairwise(times))  # nothing lost in between


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["record"], "the following arguments are required: -o/--output"),
        (["record", "-o", "{tmp}/r.gputop", "-d", "0"], "must be at least 0.1 seconds"),
        (["record", "-o", "{tmp}/r.gputop", "--duration", "-3"], "must be a positive number of seconds"),
        (["record", "-o", "{tmp}/r.gputop", "--pid", "abc"], "not a process id"),
        (["record", "-o", "{tmp}/no/such/dir/r.gputop"], "no directory"),
        (["record", "-o", "{tmp}/exists"], "already exists"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, driver, tmp_path):
    driver.write(training_box(1, []))
    (tmp_path / "exists").write_text("x")
    run = gputop(*[a.replace("{tmp}", str(tmp_path)) for a in args], env=driver.env())
    out, err = run.communicate(timeout=30)

    assert run.returncode == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("gputop: error:") and message in err
    assert (tmp_path / "exists").read_text() == "x"


def test_a_recording_of_one_snapshot_says_1_snapshot(driver, tmp_path):
    path = tmp_path / "one.gputop"

    code, err = record_until_sigterm(driver, path, 60)

    assert code == 0, err
    assert f"recorded 1 snapshot to {path}" in err
