"""Command line: parse arguments and start one of gputop's modes.

Each mode has a module here with its options (``add_parser``, or ``add_options`` for the top-level ones) and its
``main``: ``watch`` (the dashboard, ``--once``, ``--json``), ``hosts`` (``--host``, ``--hosts-file``), and one
per subcommand. Building the parser imports none of what the modes run (Textual, torch, psutil, the advisor):
each ``main`` imports what it needs.

Errors in the arguments print one line on stderr and exit 2, never a traceback or a usage dump.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from gputop import __version__
from gputop.cli import demo, doctor, estimate, export, hosts, record, replay, report, run, stream, watch
from gputop.cli.args import Parser, UsageError, check_pid_exists
from gputop.cli.console import error
from gputop.remote.hostspec import HostsError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "stream": stream.main,
    "export": export.main,
    "run": run.main,
    "report": report.main,
    "record": record.main,
    "demo": demo.main,
    "replay": replay.main,
    "doctor": doctor.main,
    "estimate": estimate.main,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gputop",
        description="A terminal dashboard for NVIDIA GPUs and the PyTorch jobs that use them.",
    )
    watch.add_options(parser)
    hosts.add_options(parser)
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in (stream, export, run, report, record, demo, replay, doctor, estimate):
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        request = hosts.request(args)
        watch.check(args)
        if args.pid is not None:
            check_pid_exists(args.pid)
        if args.command == "record":
            record.check(args)
        if args.command == "report":
            report.check(args)
    except (UsageError, HostsError) as exc:
        return error(str(exc))
    try:
        if args.command is not None:
            return COMMANDS[args.command](args)
        if request is not None:
            return hosts.show(request, args.interval, args.readonly)
        return watch.main(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
