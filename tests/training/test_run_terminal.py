"""``gputop run`` in a real terminal (tmux) that goes away: gputop must not outlive it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.factories import DEADLINE_S, wait_until
from tests.ui.test_tmux import Tmux, gputop_command, tmux  # noqa: F401 (the fixture)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_closing_the_terminal_closes_the_dashboard_and_gputop_exits(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    marker = f"gputop-hangup-{tmp_path.name}"
    job = [sys.executable, "-c", f"import time; time.sleep(600)  # {marker}"]
    env = {"GPUTOP_PROBE_DIR": str(tmp_path / "probe")}
    tmux.start_gputop("run", "--report-json", str(tmp_path / "report.json"), "--", *job, env=env)
    tmux.wait_for("focus PID")

    def ours() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if marker in cmdline or str(tmp_path / "report.json") in cmdline:
                found.append(proc)
        return found

    processes = wait_until(lambda: len(ours()) >= 2 and ours())  # gputop and its job
    subprocess.run(["tmux", "-S", str(tmux.socket), "kill-server"], check=True)

    _, alive = psutil.wait_procs(processes, timeout=DEADLINE_S)
    try:
        left = [(p.pid, p.name(), p.status()) for p in alive]
        assert not alive, f"still running after the terminal closed: {left}"
    finally:
        for proc in alive:
            proc.kill()
    assert (tmp_path / "report.json").exists(), "gputop ended its run properly: the report was written"
