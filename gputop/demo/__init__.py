"""``gputop demo``: a small bundled training job, run under the probe and watched, for a first look at gputop.

The job (``gputop.demo.job``) is a real one: a DataLoader whose worker processes decode and augment images on the
CPU for a model that needs far less time per batch, so its loop waits for data. ``gputop demo`` starts it through
``gputop run``'s machinery (``gputop.launch.run``) with an advisor window short enough for a first finding within
seconds, and stops it when the dashboard closes. This module imports neither torch nor the dashboard: the
command line builds its parser from it on every start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

JOB_MODULE = "gputop.demo.job"
WINDOW_S = 8.0
"""The advisor's window for the demo: a steady condition is raised after about 1.8 windows of training."""
STOPPED_BY_SIGNAL = (128 + 2, 128 + 15)
"""The job's exit status when a signal stopped it before it could catch it (SIGINT, SIGTERM): the demo's end."""
NEEDS_TORCH = 'gputop demo needs PyTorch: pip install "gputop-ml[torch]" (in a checkout: pip install ".[torch]")'
NOTICE = "gputop demo: watching its bundled training job. q quits and stops the job."


def add_parser(commands: Any) -> None:
    """Add ``demo`` to the subcommands (``commands``: what ``add_subparsers`` returned in ``gputop.cli``)."""
    from gputop.cli import WINDOW_HELP, _seconds

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
        type=_seconds,
        default=WINDOW_S,
        metavar="SECONDS",
        dest="demo_window",
        help=f"advisor: {WINDOW_HELP.replace('default 20', f'default {WINDOW_S:g}')}",
    )
    demo.add_argument(
        "--seconds",
        type=_seconds,
        default=1800.0,
        metavar="N",
        dest="demo_seconds",
        help="stop the job after N seconds (default 1800)",
    )


def torch_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why the job's interpreter cannot import torch (the last line of its error), or None when it can.

    Tried in a child process, as the job will: an installed but broken torch fails there too, and gputop's own
    process stays free of torch.
    """
    result = subprocess.run(
        [sys.executable, "-c", "import torch"],
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo job under the probe until the dashboard closes (or, headless, until it ends); 0 when it ran."""
    if torch_problem(dict(os.environ)) is not None:
        print(f"gputop: error: {NEEDS_TORCH}", file=sys.stderr)
        return 1
    from gputop.advisor import AdvisorConfig
    from gputop.launch import run

    command = [sys.executable, "-m", JOB_MODULE, "--seconds", f"{args.demo_seconds:g}"]
    config = AdvisorConfig(window_s=args.demo_window)
    if args.headless:
        print(
            f"gputop: demo: the bundled training job, status every 5 s, findings when it ends "
            f"(after {args.demo_seconds:g} s, or Ctrl-C)",
            file=sys.stderr,
            flush=True,
        )
    code = run(
        command,
        headless=args.headless,
        report_json=None,
        interval_s=None,
        advisor_config=config,
        dashboard_options={"notice": NOTICE},
        stop_on_close=True,
    )
    return 0 if code in STOPPED_BY_SIGNAL else code
