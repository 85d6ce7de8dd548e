"""The ``gputop replay`` subcommand: its arguments, and starting the replay (gputop/ui/replay.py).

Kept apart from the dashboard's modules so that building the command line does not import Textual.
"""

from __future__ import annotations

import argparse
import sys

from gputop.ui.replay.time import JUMP_FORMS, parse_speed


def _speed(text: str) -> float:
    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_replay_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``replay FILE [--speed X] [--at TIME] [--pid PID] [--paused]`` to gputop's subcommands."""
    from gputop.cli import _pid

    replay = commands.add_parser(
        "replay",
        help="the dashboard over a recording, with a timeline: play, pause, speed, step, jump (docs/recording.md)",
        description="Show a recording (gputop record, gputop run --record) on the dashboard, with the advisor's "
        "findings as they were at each moment and a timeline to play, pause, change speed, step and jump. "
        "Read-only: no signal is ever sent.",
    )
    replay.add_argument("replay_file", metavar="FILE", help="the recording to replay")
    replay.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="recorded seconds played per second (default 1)"
    )
    replay.add_argument("--at", metavar="TIME", dest="replay_at", help=f"start at TIME: {JUMP_FORMS}")
    replay.add_argument(
        "--pid",
        type=_pid,
        metavar="PID",
        dest="replay_pid",
        help="focus on this recorded process and judge its job (default: the recording's focus, if any)",
    )
    replay.add_argument("--paused", action="store_true", help="open paused instead of playing")


def replay_main(args: argparse.Namespace) -> int:
    """Run ``gputop replay`` with parsed ``args``; returns the exit status."""
    try:
        from gputop.ui.replay.app import run_replay
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        print("gputop: error: the replay needs Textual (pip install textual)", file=sys.stderr)
        return 1
    return run_replay(args.replay_file, speed=args.speed, at=args.replay_at, pid=args.replay_pid, paused=args.paused)
