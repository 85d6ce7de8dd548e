"""``gputop replay``: its arguments, and starting the replay (gputop/ui/replay.py)."""

from __future__ import annotations

import argparse
from typing import Any

from gputop.cli import args as checks
from gputop.cli.console import error, needs_textual
from gputop.ui.replay.time import JUMP_FORMS, parse_speed


def speed(text: str) -> float:
    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(commands: Any) -> None:
    """Add ``replay FILE [--speed X] [--at TIME] [--pid PID] [--paused]`` to gputop's subcommands."""
    replay = commands.add_parser(
        "replay",
        help="the dashboard over a recording, with a timeline: play, pause, speed, step, jump (docs/recording.md)",
        description="Show a recording (gputop record, gputop run --record) on the dashboard, with the advisor's "
        "findings as they were at each moment and a timeline to play, pause, change speed, step and jump. "
        "Read-only: no signal is ever sent.",
    )
    replay.add_argument("replay_file", metavar="FILE", help="the recording to replay")
    replay.add_argument(
        "--speed", type=speed, default=1.0, metavar="X", help="recorded seconds played per second (default 1)"
    )
    replay.add_argument("--at", metavar="TIME", dest="replay_at", help=f"start at TIME: {JUMP_FORMS}")
    replay.add_argument(
        "--pid",
        type=checks.pid,
        metavar="PID",
        dest="replay_pid",
        help="focus on this recorded process and judge its job (default: the recording's focus, if any)",
    )
    replay.add_argument("--paused", action="store_true", help="open paused instead of playing")


def main(args: argparse.Namespace) -> int:
    """Run ``gputop replay`` with parsed ``args``; returns the exit status."""
    try:
        from gputop.ui.replay.app import CannotReplay, run_replay
    except ImportError as exc:
        return needs_textual(exc, "the replay")
    try:
        return run_replay(args.replay_file, args.speed, args.replay_at, args.replay_pid, args.paused)
    except CannotReplay as exc:
        return error(str(exc), exc.status)
