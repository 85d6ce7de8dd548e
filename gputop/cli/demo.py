"""``gputop demo``: the bundled training job (``gputop.demo``) run under the probe and watched, for a first look.

It goes through ``gputop run``'s ``gputop.run.run_job`` with an advisor window short enough for a first
finding within seconds, and stops the job when the dashboard closes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import gputop.demo as bundled
from gputop.cli import args as checks
from gputop.cli.args import WINDOW_HELP
from gputop.cli.console import error, say, tell


def add_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="run a small bundled training job that waits for its data, and watch it (needs torch)",
        description="Run a small PyTorch training job shipped with gputop (python -m gputop.demo.job: real "
        "DataLoader workers decoding and augmenting images on the CPU, on the GPU if torch sees one), with the "
        "probe active, and open the dashboard on it. Quitting the dashboard stops the job.",
    )
    demo.add_argument("--headless", action="store_true", help="no dashboard: status lines, then the findings")
    demo.add_argument(
        "--window",
        type=checks.window,
        default=bundled.WINDOW_S,
        metavar="SECONDS",
        dest="demo_window",
        help=f"advisor: {WINDOW_HELP.replace('default 20', f'default {bundled.WINDOW_S:g}')}",
    )
    demo.add_argument(
        "--seconds",
        type=checks.seconds,
        default=1800.0,
        metavar="N",
        dest="demo_seconds",
        help="stop the job after N seconds of training, from its first batch (default 1800)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the demo job under the probe until the dashboard closes (or, headless, until it ends); 0 when it ran."""
    if bundled.torch_problem(dict(os.environ)) is not None:
        return error(bundled.NEEDS_TORCH, 1)
    from gputop.advisor import AdvisorConfig

    command = [sys.executable, "-m", bundled.JOB_MODULE, "--seconds", f"{args.demo_seconds:g}"]
    config = AdvisorConfig(window_s=args.demo_window)
    if args.headless:
        say(
            f"demo: the bundled training job, status every 5 s, findings when it ends "
            f"(after {args.demo_seconds:g} s, or Ctrl-C)"
        )
    from gputop.run import Console, DashboardOptions, RunOptions, run_job

    dashboard = DashboardOptions(notice=bundled.NOTICE, on_close="stop")
    code = run_job(
        RunOptions(tuple(command), headless=args.headless, advisor=config, dashboard=dashboard),
        Console(say, tell, error),
    )
    return 0 if code in bundled.STOPPED_BY_SIGNAL else code
