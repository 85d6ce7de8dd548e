"""``gputop run --record FILE``: the job's snapshots, from its start to its end, with the dashboard open or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gputop.model import Snapshot
from gputop.store import open_recording
from tests.factories import wait_until
from tests.training.conftest import SCRIPTS
from tests.ui.test_tmux import Tmux, gputop_command, tmux  # noqa: F401 (the fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

JOB = [sys.executable, "-W", "ignore", str(SCRIPTS / "train.py"), "--workers", "1", "--epochs", "0"]


def test_an_existing_file_is_refused_before_the_job_starts(tmp_path):
    taken = tmp_path / "taken.gputop"
    taken.write_text("keep me")
    marker = tmp_path / "ran"

    done = subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--headless", "--record", str(taken), "--", "touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert done.stderr == f"gputop: error: {taken} already exists: choose a new file\n"
    assert not marker.exists(), "the job did not start"
    assert taken.read_text() == "keep me"


def test_a_missing_command_leaves_an_empty_finished_recording(tmp_path):
    path = tmp_path / "run.gputop"

    done = subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--headless", "--record", str(path), "--", "no-such-command-here"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 127
    with open_recording(path) as recording:
        assert list(recording) == [] and recording.info.ended is not None


def test_the_dashboard_and_then_the_wait_for_the_job_are_both_recorded(tmp_path, tmux: Tmux):  # noqa: F811
    path = tmp_path / "run.gputop"
    status = tmp_path / "exit-status"
    env = {"GPUTOP_PROBE_DIR": str(tmp_path / "probe")}
    tmux.start_gputop("run", "-d", "0.5", "--record", str(path), "--", *JOB, "--item-s", "0.01", env=env, status=status)
    tmux.wait_until(lambda screen: "Training · PID" in screen and "pt_data_worker" in screen, "the training panel")
    shown_at = time.time()  # a snapshot with the worker was taken before
    tmux.run("send-keys", "-t", "gputop", "q")
    tmux.wait_for("dashboard closed; waiting for PID")
    closed_at = time.time()  # any snapshot taken after is the wait's
    with open_recording(path) as recording:  # still being written: what is committed can be read
        while_open = wait_until(lambda: [s.time for s in recording])
        assert recording.info.ended is None
    gputop_pid = next(
        p.pid for p in psutil.process_iter(["cmdline"]) if str(path) in (p.info["cmdline"] or []) and p.name() != "env"
    )

    def recorded_since_the_dashboard_closed() -> list[Snapshot] | None:
        """The snapshots after the dashboard's, once they cover a second and one shows the job's worker: the job
        goes on with the dashboard closed, and gputop keeps recording it."""
        with open_recording(path) as recording:
            later = [s for s in recording if s.time > while_open[-1]]
        if (
            later
            and later[-1].time - while_open[-1] >= 1.0
            and any(with_worker(s) for s in later if s.time > closed_at)
        ):
            return later
        return None

    wait_until(recorded_since_the_dashboard_closed, "a second of snapshots after the dashboard closed")
    os.kill(gputop_pid, signal.SIGINT)  # forwarded to the job, which exits 43
    assert tmux.exit_status(status) == "43"

    with open_recording(path) as recording:
        snapshots = list(recording)
        assert recording.info.ended is not None and recording.damage is None
    times = [s.time for s in snapshots]
    assert times == sorted(times) and times[: len(while_open)] == while_open
    assert times[-1] - while_open[-1] >= 1.0, "the wait after the dashboard closed is recorded too"
    job_pid = snapshots[0].focus_pid
    assert all(s.focus_pid == job_pid for s in snapshots)
    dashboard, wait = [s for s in snapshots if s.time <= shown_at], [s for s in snapshots if s.time > closed_at]
    assert any(map(with_worker, dashboard)) and any(map(with_worker, wait)), "the job's view, with its worker"


def with_worker(snapshot: Snapshot) -> bool:
    """The snapshot holds the training view of its focused job, with a DataLoader worker."""
    return any(v.pid == snapshot.focus_pid and v.workers for v in snapshot.training)
