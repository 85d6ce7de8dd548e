"""Command line: parse arguments and start one of gputop's modes.

Errors in the arguments print one line on stderr and exit 2, never a traceback or a usage dump.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputop import __version__
from gputop.limits import MAX_PID, MAX_SECONDS, MIN_INTERVAL_S
from gputop.remote.options import HostsError, HostsRequest, add_host_options, hosts_request

if TYPE_CHECKING:
    from gputop.advisor import AdvisorConfig

WINDOW_HELP = "how long a condition must hold before it is reported (default 20)"
"""The advisor's ``DEFAULT_WINDOW_S``, spelled out: importing the advisor here would slow every start of gputop."""


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see gputop --help)")


REPORT_SECONDS = 60.0
"""How long ``gputop report --pid`` watches a live job without ``--seconds``."""


# float() also takes other scripts' digits, underscores, spaces, 'nan' and 'infinity': only plain decimals here.
_DECIMAL = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?", re.ASCII)


def _number(text: str, what: str) -> float:
    """``text``, a plain decimal number (``2``, ``0.5``, ``1e3``), as a float."""
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}")
    return float(text)


def _interval(text: str) -> float:
    value = _number(text, "a number of seconds")
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_S} seconds, got {text}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:.0f} seconds (a day), got {text}")
    return value


def _positive_int(what: str, most: int) -> Callable[[str], int]:
    """An argparse type for whole numbers from 1 to ``most`` in ASCII digits, named ``what`` in its error."""

    def parse(text: str) -> int:
        # int() takes '١' (Arabic-Indic one), '1_000' and ' 1 ': only plain digits name a process or a count.
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= len(str(most)) else 0
        if not 0 < value <= most:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}")
        return value

    return parse


def _seconds(text: str) -> float:
    """A positive number of seconds, at most a day."""
    value = _number(text, "a number of seconds")
    if not 0 < value <= MAX_SECONDS:  # also rejects NaN and infinities
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds up to {MAX_SECONDS:.0f}, got {text}")
    return value


_pid = _positive_int(f"a process id (1 to {MAX_PID})", MAX_PID)
_count = _positive_int("a count of 1 or more", 1_000_000_000)


def _check_pid_exists(pid: int) -> None:
    import psutil

    if not psutil.pid_exists(pid):
        raise UsageError(f"no process with PID {pid}")


def _add_interval(parser: argparse.ArgumentParser, dest: str, help: str, default: float | None = 1.0) -> None:
    """The ``-d/--interval SECONDS`` option every mode shares, stored under ``dest``."""
    parser.add_argument("-d", "--interval", type=_interval, default=default, metavar="SECONDS", dest=dest, help=help)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gputop",
        description="A terminal dashboard for NVIDIA GPUs and the PyTorch jobs that use them.",
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot as a table and exit")
    parser.add_argument("--json", action="store_true", help="print one snapshot as a JSON document and exit")
    _add_interval(parser, "interval", f"seconds between updates (default 1.0, at least {MIN_INTERVAL_S})")
    parser.add_argument("--pid", type=_pid, metavar="PID", help="focus on one process, its children and workers")
    parser.add_argument("--readonly", action="store_true", help="never send signals to processes")
    add_host_options(parser)
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    stream = commands.add_parser("stream", help="print one JSON snapshot per line, every interval, until stopped")
    _add_interval(stream, "stream_interval", "seconds between snapshots (default 1.0)")
    stream.add_argument("-n", "--count", type=_count, metavar="N", help="stop after N snapshots")
    stream.add_argument(
        "--full", action="store_true", help="whole snapshots, lossless, for gputop --host (not the schema-1 document)"
    )
    export = commands.add_parser(
        "export",
        help="serve the snapshot as Prometheus metrics, or write it for node_exporter (docs/exporter.md)",
        description="Serve GPU and host metrics in the Prometheus text format on --listen (default "
        "127.0.0.1:9400, this machine only), and/or write them to DIR/gputop.prom for node_exporter's textfile "
        "collector, refreshed every interval.",
    )
    export.add_argument("--listen", metavar="HOST:PORT", help="address to serve on (default 127.0.0.1:9400)")
    export.add_argument("--textfile", metavar="DIR", help="write DIR/gputop.prom atomically every interval")
    _add_interval(export, "export_interval", "seconds between refreshes (default 1.0)")
    export.add_argument(
        "--per-process", action="store_true", help="add per-process series labelled by GPU and PID (no command lines)"
    )
    run = commands.add_parser(
        "run",
        help="run a training command with the probe active and watch it: gputop run [--headless] -- CMD ARGS...",
        description="Start CMD with gputop's probe active in every Python process it starts, show the dashboard "
        "focused on it, forward signals to it, and exit with its exit status.",
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
    run.add_argument("--window", type=_seconds, metavar="SECONDS", dest="run_window", help=f"advisor: {WINDOW_HELP}")
    run.add_argument(
        "--detach", action="store_true", help="leave CMD running if gputop is killed (by default it ends with gputop)"
    )
    _add_interval(
        run,
        "run_interval",
        "dashboard: seconds between updates (default 1.0); headless: between status lines (default 5.0)",
        default=None,  # the mode decides
    )
    run.add_argument("run_command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    report = commands.add_parser(
        "report",
        help="the advisor's findings on a training job: watched live for N seconds, or over a recording",
        usage="gputop report --pid PID [--seconds N] [--json] [--window S]\n"
        "       gputop report FILE [--pid PID] [--json] [--window S]",
        description="Watch PID and the training processes below it for N seconds, then print what the advisor "
        "found: the change each problem needs, with the value and the measurements behind it. The input pipeline's "
        "timing comes from gputop's probe (a job started with gputop run, or one that calls gputop.probe.install()). "
        "Given a recording FILE (gputop record, gputop run --record), run the advisor over all of it instead and "
        "say when each finding held (docs/recording.md).",
    )
    report.add_argument("report_file", nargs="?", metavar="FILE", help="a recording to report on")
    report.add_argument(
        "--pid", type=_pid, metavar="PID", dest="report_pid", help="the job to watch (in a recording: to judge)"
    )
    report.add_argument(
        "--seconds",
        type=_seconds,
        metavar="N",
        help=f"how long to watch (default {REPORT_SECONDS:g}; at least one --window)",
    )
    report.add_argument("--json", action="store_true", dest="report_as_json", help="print a JSON document")
    report.add_argument("--window", type=_seconds, metavar="SECONDS", dest="report_window", help=WINDOW_HELP)
    record = commands.add_parser(
        "record",
        help="record snapshots to a file until stopped (docs/recording.md)",
        description="Sample every interval and append each snapshot to FILE, a new SQLite recording, until Ctrl-C, "
        "SIGTERM or --duration. Snapshots are committed every 2 s, so a killed gputop loses at most the last 2 s.",
    )
    record.add_argument("-o", "--output", required=True, metavar="FILE", help="the new recording file to write")
    record.add_argument("--pid", type=_pid, metavar="PID", dest="record_pid", help="focus on one process")
    _add_interval(record, "record_interval", "seconds between snapshots (default 1.0)")
    record.add_argument("--duration", type=_seconds, metavar="SECONDS", help="stop after this many seconds")
    from gputop.demo import add_parser as add_demo_parser

    add_demo_parser(commands)
    from gputop.ui.replay_cli import add_replay_parser

    add_replay_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        hosts = hosts_request(args)
        if args.pid is not None:
            _check_pid_exists(args.pid)
        if args.command == "record" and args.record_pid is not None:
            _check_pid_exists(args.record_pid)
        watch_s = _check_report_args(args) if args.command == "report" else None
        if watch_s is not None:
            _check_pid_exists(args.report_pid)
            window_s = _advisor_config(args.report_window).window_s
            if watch_s < window_s:
                raise UsageError(
                    f"--seconds {watch_s:g} is shorter than the {window_s:g} s a condition must hold "
                    "to be reported (--window)"
                )
    except (UsageError, HostsError) as exc:
        print(f"gputop: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "demo":
            from gputop.demo import run_demo

            return run_demo(args)
        if args.command == "replay":
            from gputop.ui.replay_cli import replay_main

            return replay_main(args)
        if args.command == "export":
            return _export(args)
        if args.command == "report":
            return _report_recording(args) if watch_s is None else _report(args, watch_s)
        if args.command == "record":
            return _record(args)
        if args.command == "stream":
            return _stream(args.stream_interval, args.count, args.pid, args.full)
        if hosts is not None:
            return _hosts(args.interval, args.readonly, hosts)
        if args.once or args.json:
            return _once(args.json, args.pid)
        return _watch(args.interval, args.pid, args.readonly)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _once(as_json: bool, pid: int | None) -> int:
    from gputop.collect.sampler import SnapshotMaker
    from gputop.document import snapshot_to_json
    from gputop.table import render_text

    maker = SnapshotMaker(focus_pid=pid)
    try:
        snap = maker.one_shot()
    finally:
        maker.close()
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    sys.stdout.write(snapshot_to_json(snap) + "\n" if as_json else render_text(snap, width))
    sys.stdout.flush()
    return 0


def _stream(interval_s: float, count: int | None, pid: int | None, full: bool = False) -> int:
    """One compact JSON document per line: the same schema as --json, for other programs; ``full``: the whole
    snapshot instead (``gputop.store.snapshot_json``), for the multi-host view on another machine."""
    import json
    import time

    from gputop.collect.sampler import SnapshotMaker
    from gputop.document import snapshot_to_dict
    from gputop.store import snapshot_json

    maker = SnapshotMaker(focus_pid=pid)
    try:
        snap = maker.one_shot()
        written = 0
        while True:
            if full:  # gputop --host on another machine reads these back into snapshots
                sys.stdout.buffer.write(snapshot_json(snap) + b"\n")
            else:
                sys.stdout.write(json.dumps(snapshot_to_dict(snap), separators=(",", ":")) + "\n")
            sys.stdout.flush()
            written += 1
            if count is not None and written >= count:
                return 0
            time.sleep(max(0.0, interval_s - (time.time() - snap.time)))
            snap = maker.snapshot()
    finally:
        maker.close()


def _export(args: argparse.Namespace) -> int:
    from gputop.export.exporter import run_exporter

    return run_exporter(args.listen, args.textfile, args.export_interval, args.per_process)


def _run(args: argparse.Namespace) -> int:
    from gputop.launch import run

    command = args.run_command[1:] if args.run_command[:1] == ["--"] else args.run_command
    if not command:
        print("gputop: error: no command to run: gputop run [--headless] -- CMD ARGS...", file=sys.stderr)
        return 2
    return run(
        command,
        headless=args.headless,
        report_json=args.report_json,
        interval_s=args.run_interval,
        advisor_config=_advisor_config(args.run_window),
        record=args.record,
        detach=args.detach,
    )


def _record(args: argparse.Namespace) -> int:
    from gputop.store.record import run_recorder

    pid = args.record_pid if args.record_pid is not None else args.pid
    return run_recorder(args.output, args.record_interval, pid=pid, duration_s=args.duration)


def _advisor_config(window_s: float | None) -> AdvisorConfig:
    from gputop.advisor import AdvisorConfig

    return AdvisorConfig() if window_s is None else AdvisorConfig(window_s=window_s)


def _check_report_args(args: argparse.Namespace) -> float | None:
    """How long ``gputop report`` watches a live job, or None for a recording; UsageError for a bad mix."""
    if args.report_file is not None:
        if args.seconds is not None:
            raise UsageError("--seconds is for watching a live job: a recording is reported whole")
        return None
    if args.report_pid is None:
        raise UsageError("gputop report needs --pid PID (a live job) or a recording FILE")
    return REPORT_SECONDS if args.seconds is None else args.seconds


def _report_recording(args: argparse.Namespace) -> int:
    import json

    from gputop.advisor.report import recording_document, render_recording_report, report_recording
    from gputop.store import RecordingError

    try:
        report = report_recording(args.report_file, args.report_pid, _advisor_config(args.report_window))
    except RecordingError as exc:
        print(f"gputop: error: {exc}", file=sys.stderr)
        return 2
    if args.report_as_json:
        sys.stdout.write(json.dumps(recording_document(report), indent=2) + "\n")
    else:
        sys.stdout.write(render_recording_report(report))
    sys.stdout.flush()
    return 0


def _report(args: argparse.Namespace, seconds: float) -> int:
    """``gputop report --pid``: watch the live job for ``seconds``, then print the advisor's findings."""
    import json

    from gputop.advisor.report import advice_document, render_advice, watch

    seen = watch(args.report_pid, seconds, _advisor_config(args.report_window))
    raised = seen.advisor.raised()
    if args.report_as_json:
        document = advice_document(args.report_pid, raised, watched_s=round(seen.watched_s, 1), ended=seen.ended)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        ended = f"; it ended after {seen.watched_s:.0f} s" if seen.ended else ""
        sys.stdout.write(f"PID {args.report_pid}: watched {seen.watched_s:.0f} s, {seen.snapshots} snapshots{ended}\n")
        sys.stdout.write(render_advice(raised))
    sys.stdout.flush()
    return 0


def _watch(interval_s: float, pid: int | None, readonly: bool) -> int:
    try:
        from gputop.ui.app import run_dashboard
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        print(
            "gputop: error: the dashboard needs Textual (pip install textual); "
            "gputop --once and --json work without it",
            file=sys.stderr,
        )
        return 1
    return run_dashboard(interval_s=interval_s, pid=pid, readonly=readonly)


def _hosts(interval_s: float, readonly: bool, hosts: HostsRequest) -> int:
    try:
        from gputop.ui.hosts import run_hosts
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        print("gputop: error: the multi-host view needs Textual (pip install textual)", file=sys.stderr)
        return 1
    return run_hosts(hosts, interval_s=interval_s, readonly=readonly)
