"""``gputop demo``'s advisor window: handed to ``gputop run``'s machinery once, and the dashboard's advisor uses it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gputop.demo
import gputop.run
from gputop.advisor import AdvisorConfig
from gputop.cli import build_parser
from gputop.cli.demo import main as run_demo
from gputop.demo import NOTICE, WINDOW_S
from gputop.run import DashboardOptions, RunOptions


@pytest.mark.parametrize(("argv", "window_s"), [((), WINDOW_S), (("--window", "3"), 3.0)])
def test_the_window_goes_to_launch_once_as_the_advisor_config(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], window_s: float
) -> None:
    calls: list[RunOptions] = []

    def fake_run(options: RunOptions, console: Any) -> int:
        calls.append(options)
        return 0

    monkeypatch.setattr(gputop.demo, "torch_problem", lambda environ=None: None)
    monkeypatch.setattr(gputop.run, "run_job", fake_run)

    assert run_demo(build_parser().parse_args(["demo", *argv])) == 0

    [options] = calls
    assert options.advisor == AdvisorConfig(window_s=window_s)  # run_job gives it to the dashboard's advisor too
    assert options.dashboard == DashboardOptions(notice=NOTICE, on_close="stop")


# In the child: torch is taken as present and the job is a stdlib module that ignores its arguments and ends at
# once (`python -m this`), so no torch job runs; the real dashboard is built, and instead of running it says what
# its advisor and banner were given.
PREAMBLE = """
import sys
import gputop.demo
import gputop.ui.app

gputop.demo.torch_problem = lambda environ=None: None
gputop.demo.JOB_MODULE = "this"

def run(self, *args, **kwargs):
    print("window", self.feed.advisor.config.window_s, "notices", self.notices, file=sys.stderr, flush=True)

gputop.ui.app.GputopApp.run = run
from gputop.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_dashboards_advisor_has_the_demos_window(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir(mode=0o700)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PREAMBLE, "demo", "--window", "3"],
        env={**os.environ, "GPUTOP_PROBE_DIR": str(probe)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )

    # The dashboard closes at once and stops the job wherever its start has got to, so the exit status, the
    # job's, is no concern here; gputop's own output is.
    assert "Traceback" not in result.stderr
    assert f"window 3.0 notices ({NOTICE!r},)" in result.stderr
