"""``gputop run``: start a training command with the probe active, watch it, and return its exit code.

Its options are here; running the job is ``gputop.run``'s, shared with ``gputop demo`` and imported only then.
"""

from __future__ import annotations

import argparse
from typing import Any

from gputop.cli import args as checks
from gputop.cli.args import WINDOW_HELP
from gputop.cli.console import error, say, tell


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a training command with the probe active and watch it: gputop run [--headless] -- CMD ARGS...",
        description="Start CMD with gputop's probe active in every Python process it starts, show the dashboard "
        "focused on it, forward signals to it, and exit with its exit status. When CMD ends the dashboard says so "
        "at once and keeps its last view until q (--exit-with-job: closes by itself).",
    )
    run.add_argument("--headless", action="store_true", help="no dashboard: print a one-line status now and then")
    run.add_argument(
        "--report-json",
        metavar="FILE",
        help="at exit, write the advisor's findings and the job's last training view to FILE as JSON ('-': stdout)",
    )
    run.add_argument(
        "--record", metavar="FILE", help="record every snapshot of the job into FILE, a new recording (gputop replay)"
    )
    run.add_argument(
        "--window", type=checks.window, metavar="SECONDS", dest="run_window", help=f"advisor: {WINDOW_HELP}"
    )
    run.add_argument(
        "--detach", action="store_true", help="leave CMD running if gputop is killed (by default it ends with gputop)"
    )
    run.add_argument(
        "--exit-with-job",
        action="store_true",
        help="dashboard: close it when CMD ends and print the findings, as headless does (by default the dashboard "
        "says the job ended and keeps its last view and findings, marked final, until q)",
    )
    run.add_argument(
        "--no-history",
        action="store_false",
        dest="history",
        help="neither say what changed since the last run of this command nor keep this run's summary for the next "
        "(kept in $XDG_STATE_HOME/gputop/runs, else ~/.local/state/gputop/runs: docs/training.md)",
    )
    checks.add_interval(
        run,
        "run_interval",
        "dashboard: seconds between updates (default 1.0); headless: between status lines (default 5.0)",
        default=None,  # the mode decides
    )
    run.add_argument("run_command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")


def main(args: argparse.Namespace) -> int:
    command = args.run_command[1:] if args.run_command[:1] == ["--"] else args.run_command
    if not command:
        return error("no command to run: gputop run [--headless] -- CMD ARGS...", 2)
    from gputop.run import Console, DashboardOptions, RunOptions, run_job

    options = RunOptions(
        tuple(command),
        headless=args.headless,
        interval_s=args.run_interval,
        advisor=checks.advisor_config(args.run_window),
        report_json=args.report_json,
        record=args.record,
        detach=args.detach,
        dashboard=DashboardOptions(exit_with_job=args.exit_with_job),
        history=args.history,
    )
    return run_job(options, Console(say, tell, error))
