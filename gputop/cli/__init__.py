"""Command line: parse arguments and start one of gputop's modes.

Each mode has a module here with its options (``add_parser``, or ``add_options`` for the top-level ones) and its
``main``: ``watch`` (the dashboard, ``--once``, ``--json``), ``hosts`` (``--host``, ``--hosts-file``), and one
per subcommand. Building the parser imports none of what the modes run (Textual, torch, psutil, the advisor):
each ``main`` imports what it needs. A subcommand's module is imported only when the command line may name it
(``parse_args``), so the dashboard starts without them.

Errors in the arguments print one line on stderr and exit 2, never a traceback or a usage dump.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from gputop import __version__, startup
from gputop.cli import hosts, watch
from gputop.cli.args import Parser, UsageError, check_pid_exists
from gputop.cli.console import error
from gputop.remote.hostspec import HostsError

COMMANDS = ("stream", "export", "run", "report", "record", "demo", "replay", "doctor", "estimate")
"""The subcommands, each a module of this package, in the order ``--help`` lists them."""


def command_module(name: str) -> ModuleType:
    """The module of subcommand ``name`` (``gputop.cli.NAME``), imported only when a command line needs it."""
    if name not in COMMANDS:
        raise KeyError(name)
    return importlib.import_module(f"gputop.cli.{name}")


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``commands=False``: the top-level options alone, which the dashboard needs, without
    importing every subcommand's module to build its parser."""
    parser = Parser(
        prog="gputop",
        description="A terminal dashboard for NVIDIA GPUs and the PyTorch jobs that use them.",
    )
    watch.add_options(parser)
    hosts.add_options(parser)
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    if not commands:
        parser.set_defaults(command=None)
        return parser
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        command_module(name).add_parser(subparsers)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``build_parser().parse_args(argv)``. A command line of top-level options only (the dashboard's, the most
    common and the one whose start is timed) is read by the parser without the subcommands; anything else it
    does not take whole (a command, an error, help) goes to the whole parser, which answers as it always did."""
    words = list(sys.argv[1:] if argv is None else argv)
    if not any(w == "-h" or (w.startswith("--h") and "--help".startswith(w)) for w in words):
        try:
            args, rest = build_parser(commands=False).parse_known_args(words)
        except UsageError:
            pass
        else:
            if not rest:
                return args
    return build_parser().parse_args(words)


def entry() -> None:
    """The ``gputop`` command: ``main`` on the process's own arguments, and its exit status. The garbage collector
    is held while it starts (``gputop.startup``): a one-shot read ends before it would resume, the dashboard
    resumes it after its first frame, every other command before it runs."""
    startup.hold()
    sys.exit(main(quick_exit=True))


def main(argv: Sequence[str] | None = None, quick_exit: bool = False) -> int:
    """Run the command line ``argv``; returns the exit status. ``quick_exit``: the process ends here once this
    machine's dashboard has closed or a one-shot read (``--once``, ``--json``) has printed (``end_now``)."""
    try:
        args = parse_args(argv)
        request = hosts.request(args)
        watch.check(args)
        if args.pid is not None:
            check_pid_exists(args.pid)
        if args.command in ("record", "report"):
            command_module(args.command).check(args)
    except (UsageError, HostsError) as exc:
        return error(str(exc))
    if args.command is not None or request is not None:
        startup.resume()  # the local dashboard resumes it once its first frame is drawn; a one-shot read never
    try:
        if args.command is not None:
            return int(command_module(args.command).main(args))
        if request is not None:
            return hosts.show(request, args.interval, args.readonly)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    try:
        code = watch.main(args)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    if quick_exit:
        end_now(code)
    return code


def end_now(code: int) -> None:
    """End the process with ``code`` after flushing its output, without the interpreter's teardown.

    ``gputop``, ``--once`` and ``--json`` leave nothing that teardown would finish: the snapshot is written or the
    screen given back, the sampler stopped and NVML shut down, no child or file of their own left open. Tearing
    down the few hundred modules they imported takes 0.1 to 0.2 s after the dashboard's ``q`` (a tenth of a
    one-shot read's CPU time), spent after the user has the answer. Other commands (recordings, a job's run, the
    hosts' connections) end as Python ends them."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that has gone (a closed pipe): nobody to tell
            stream.flush()
    os._exit(code)
