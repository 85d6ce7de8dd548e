"""``gputop run``'s dashboard when its job ends, in a real terminal (tmux) around real jobs: the job is reaped at
once, the screen says how and when it ended and keeps its last view, ``q`` exits with the job's status; with
``--exit-with-job`` gputop exits by itself. After ``q`` the headless watch counts the job's time, not its own."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.factories import wait_until
from tests.fakenvml.build import build
from tests.fakenvml.state import FakeState, write_state
from tests.machines import h100
from tests.training.conftest import SCRIPTS
from tests.ui.test_tmux import Tmux, tmux  # noqa: F401 (the fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PYTHON = [sys.executable, "-W", "ignore"]


def env_for(tmp_path: Path) -> dict[str, str]:
    """One H100 that the job does not use (the screen said "uses no GPU" of it), and a private probe directory."""
    state = tmp_path / "nvml-state.txt"
    write_state(state, FakeState(gpus=[h100(0)]))
    return {
        "LD_LIBRARY_PATH": str(build("r550")),
        "FAKE_NVML_STATE": str(state),
        "GPUTOP_PROBE_DIR": str(tmp_path / "probe"),
    }


def focus_pid(tmux: Tmux) -> int:  # noqa: F811
    screen = tmux.wait_for("focus PID", timeout_s=60)
    return int(re.search(r"focus PID (\d+)", screen)[1])  # type: ignore[index]


def exit_status(status: Path, timeout_s: float = 30) -> int:
    return int(wait_until(lambda: status.exists() and status.read_text().strip(), "gputop's exit", timeout_s))


def lingers(pid: int) -> bool:
    """Whether ``pid`` is still a process of ours: running, or a zombie nobody reaped."""
    try:
        return psutil.Process(pid).status() is not None
    except psutil.NoSuchProcess:
        return False


def test_a_job_that_ends_is_reaped_at_once_and_its_end_shown_until_q(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    status = tmp_path / "exit-status"
    job = [*PYTHON, "-c", "import time; time.sleep(4); raise SystemExit(3)"]
    tmux.start_gputop("run", "--", *job, env=env_for(tmp_path), status=status, size=(160, 48))
    pid = focus_pid(tmux)
    tmux.wait_for("uses no GPU", timeout_s=30)

    screen = tmux.wait_until(lambda s: "Job ended" in s and "k Signal" not in s, "the end", timeout_s=60)
    assert re.search(r"Job ended \d\d:\d\d:\d\d after \d+s, exit status 3 · last view kept · q quits", screen)
    assert not lingers(pid), "reaped, not a zombie"
    assert "JOB ENDED" in screen.splitlines()[0]
    assert f"Training · PID {pid} python · probe none · final" in screen
    assert "uses no GPU" not in screen
    assert "p Pause" not in screen, "the keys that act on live processes and sampling are gone"

    time.sleep(1.5)  # what the screen shows stays: the job's last view
    assert tmux.screen() == screen
    assert not status.exists(), "the dashboard waits for q"
    tmux.run("send-keys", "-t", "gputop", "q")
    assert exit_status(status) == 3


def test_sigint_to_a_torchrun_job_keeps_its_ranks_last_view(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    status = tmp_path / "exit-status"
    job = [*PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    job += [str(SCRIPTS / "ddp.py"), "--seconds", "600", "--workers", "1"]
    tmux.start_gputop("run", "--", *job, env=env_for(tmp_path), status=status, size=(160, 48))
    agent = focus_pid(tmux)
    tmux.wait_until(lambda s: "rank 0 of 2 · probe ok" in s, "rank 0's training view", timeout_s=120)

    psutil.Process(agent).send_signal(2)  # as Ctrl-C to torchrun alone: it stops its ranks and exits 1

    screen = tmux.wait_for("Job ended", timeout_s=90)
    assert re.search(r"Job ended \d\d:\d\d:\d\d after [\d:]+s?, exit status 1 · last view kept", screen)
    assert not lingers(agent), "reaped, not a zombie"
    assert re.search(r"Training · PID \d+ python · rank \d of 2 · probe \w+ · final", screen), screen
    tmux.run("send-keys", "-t", "gputop", "q")
    assert exit_status(status) == 1


def test_exit_with_job_closes_the_dashboard_and_says_the_end_and_the_findings(
    tmp_path: Path,
    tmux: Tmux,  # noqa: F811
) -> None:
    status = tmp_path / "exit-status"
    job = [*PYTHON, "-c", "import time; time.sleep(2); raise SystemExit(3)"]
    tmux.start_gputop("run", "--exit-with-job", "--", *job, env=env_for(tmp_path), status=status)

    assert exit_status(status, timeout_s=60) == 3
    screen = tmux.screen()
    assert re.search(r"gputop: PID \d+ ended \d\d:\d\d:\d\d after \d+s, exit status 3", screen), screen
    assert "gputop: advisor findings for PID" in screen


def test_after_q_the_status_line_counts_the_jobs_time_not_the_watchs(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    status = tmp_path / "exit-status"
    job = [*PYTHON, str(SCRIPTS / "train.py"), "--workers", "1", "--epochs", "0", "--item-s", "0.02", "--persistent"]
    tmux.start_gputop("run", "-d", "1", "--", *job, env=env_for(tmp_path), status=status)
    pid = focus_pid(tmux)
    tmux.wait_for(f"Training · PID {pid}", timeout_s=60)
    ran_s = time.monotonic()
    time.sleep(6)
    ran_s = time.monotonic() - ran_s

    tmux.run("send-keys", "-t", "gputop", "q")
    screen = tmux.wait_until(lambda s: re.search(r"gputop: PID \d+ up ", s) is not None, "a status line", 60)
    up = re.search(r"gputop: PID \d+ up (?:(\d+):)?(\d+)s?", screen)
    assert up is not None
    assert int(up[1] or 0) * 60 + int(up[2]) >= ran_s, screen  # the job ran that long before q, and more

    psutil.Process(pid).send_signal(15)
    assert exit_status(status) == 42  # the job's own answer to SIGTERM
    screen = tmux.screen()
    assert "Traceback" not in screen and "failed" not in screen, "the closed dashboard is not told of the end"
