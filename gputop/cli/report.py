"""``gputop report``: the advisor's findings on a live job watched for N seconds, or over a recording; or two
runs of a job compared.

The findings as text and as JSON documents are ``gputop.advisor.report``'s; a run's summary, the comparison and
its text are ``gputop.compare``'s. The files are opened here.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

from gputop.cli import args as checks
from gputop.cli.args import REPORT_SECONDS, WINDOW_HELP, UsageError
from gputop.cli.console import error

if TYPE_CHECKING:
    from gputop.advisor import Advisor, AdvisorConfig
    from gputop.advisor.process_use import ProcessUse
    from gputop.compare.summary import RunSummary


def add_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="the advisor's findings on a training job: watched live for N seconds, or over a recording",
        usage="gputop report --pid PID [--seconds N] [--json] [--window S]\n"
        "       gputop report FILE [--pid PID] [--json] [--window S]\n"
        "       gputop report A B [--json] [--window S] [--different-jobs]",
        description="Watch PID and the training processes below it for N seconds, then print what the advisor "
        "found: the change each problem needs, with the value and the measurements behind it. The input pipeline's "
        "timing comes from gputop's probe (a job started with gputop run, or one that calls gputop.probe.install()). "
        "Given a recording FILE (gputop record, gputop run --record), run the advisor over all of it instead and "
        "say when each finding held (docs/recording.md). Given two runs A and B (recordings, or documents of gputop "
        "run --report-json), say what changed from A to B: the DataLoader's settings, steps/s, samples/s, the data "
        "wait, the step's phases, memory, MFU, energy per sample, and each finding gone, new or still there.",
    )
    report.add_argument("report_file", nargs="?", metavar="FILE", help="a recording to report on (A: the run before)")
    report.add_argument(
        "report_other",
        nargs="?",
        metavar="B",
        help="a second run to compare with the first: a recording or a --report-json document",
    )
    report.add_argument(
        "--different-jobs",
        action="store_true",
        help="compare two runs whose commands run different jobs (refused by default)",
    )
    report.add_argument(
        "--pid", type=checks.pid, metavar="PID", dest="report_pid", help="the job to watch (in a recording: to judge)"
    )
    report.add_argument(
        "--seconds",
        type=checks.seconds,
        metavar="N",
        help=f"how long to watch (default {REPORT_SECONDS:g}; at least one --window)",
    )
    report.add_argument("--json", action="store_true", dest="report_as_json", help="print a JSON document")
    report.add_argument("--window", type=checks.window, metavar="SECONDS", dest="report_window", help=WINDOW_HELP)


def watch_seconds(args: argparse.Namespace) -> float | None:
    """How long ``gputop report`` watches a live job, or None for a recording; UsageError for a bad mix."""
    if args.report_other is not None:
        if args.seconds is not None:
            raise UsageError("--seconds is for watching a live job: two runs are compared whole")
        if args.report_pid is not None:
            raise UsageError("--pid picks a process to judge in one recording: two runs compare their training process")
        return None
    if args.different_jobs:
        raise UsageError("--different-jobs is for comparing two runs: gputop report A B")
    if args.report_file is not None:
        if args.seconds is not None:
            raise UsageError("--seconds is for watching a live job: a recording is reported whole")
        return None
    if args.report_pid is None:
        raise UsageError("gputop report needs --pid PID (a live job) or a recording FILE")
    return REPORT_SECONDS if args.seconds is None else args.seconds


def check(args: argparse.Namespace) -> None:
    """``UsageError`` for a bad mix, a job that does not exist, or a watch shorter than the advisor's window."""
    watch_s = watch_seconds(args)
    if watch_s is None:
        return
    checks.check_pid_exists(args.report_pid)
    window_s = checks.advisor_config(args.report_window).window_s
    if watch_s < window_s:
        raise UsageError(
            f"--seconds {watch_s:g} is shorter than the {window_s:g} s a condition must hold to be reported (--window)"
        )


def main(args: argparse.Namespace) -> int:
    watch_s = watch_seconds(args)
    if args.report_other is not None:
        return report_two(args)
    return report_file(args) if watch_s is None else report_live(args, watch_s)


class BadRun(Exception):
    """A file that holds no run to compare: the message is one line, fit to show."""


def report_two(args: argparse.Namespace) -> int:
    """``gputop report A B``: what changed from run A to run B."""
    import json

    from gputop.compare.changes import compare, job_of, same_job
    from gputop.compare.render import comparison_document, render_comparison

    try:
        a, b = (load_run(path, args.report_window) for path in (args.report_file, args.report_other))
    except BadRun as exc:
        return error(str(exc), 2)
    if not args.different_jobs and not same_job(a, b):
        return error(
            f"A and B ran different jobs: {job_of(a.command or '')} and {job_of(b.command or '')} "
            "(--different-jobs compares them anyway)",
            2,
        )
    comparison = compare(a, b)
    if args.report_as_json:
        sys.stdout.write(json.dumps(comparison_document(comparison), indent=2) + "\n")
    else:
        sys.stdout.write(render_comparison(comparison))
    sys.stdout.flush()
    return 0


SQLITE_MAGIC = b"SQLite format 3\x00"


def load_run(path: str, window_s: float | None = None) -> RunSummary:
    """The summary of the run in ``path``: a recording (its steady part, with the advisor over all of it, at
    ``window_s`` or else the window its run judged it with) or a ``--report-json`` document; ``BadRun`` for a
    file that is missing, unreadable, damaged, not gputop's, or holds no training process."""
    import os
    import stat

    from gputop.advisor.window import replay_config
    from gputop.codec.bounds import MAX_SNAPSHOT_BYTES, parse
    from gputop.compare.decode import summary_from_report
    from gputop.compare.summary import summarise_recording
    from gputop.sanitize import printable
    from gputop.store import RecordingError, open_recording

    shown = printable(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise BadRun(f"{shown}: not a file")
            text = f.read(MAX_SNAPSHOT_BYTES + 1)
    except FileNotFoundError:
        raise BadRun(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise BadRun(f"{shown}: not a file") from None
    except OSError as exc:
        raise BadRun(f"cannot read {shown}: {exc.strerror or exc}") from None
    if text.startswith(SQLITE_MAGIC):
        try:
            with open_recording(path) as recording:
                summary = summarise_recording(recording, replay_config(window_s, recording.info.window_s))
                damage = recording.damage
        except RecordingError as exc:
            raise BadRun(str(exc)) from None
        if damage:
            raise BadRun(f"{damage}: a comparison needs the whole run")
    else:
        try:
            summary = summary_from_report(parse(text), path)
        except ValueError as exc:
            why = str(exc).removesuffix(": not a snapshot")
            raise BadRun(f"{shown}: not a gputop recording or --report-json document: {why}") from None
    if summary is None:
        raise BadRun(f"{shown}: no training process in it (no probe report, DataLoader workers or launcher rank)")
    return summary


def report_file(args: argparse.Namespace) -> int:
    """``gputop report FILE``: the advisor over the whole recording."""
    import json

    from gputop.advisor.report import recording_document, render_recording_report, report_recording
    from gputop.advisor.window import replay_config
    from gputop.store import RecordingError, open_recording

    try:
        with open_recording(args.report_file) as recording:
            config = replay_config(args.report_window, recording.info.window_s)
            report = report_recording(recording, args.report_pid, config)
    except RecordingError as exc:
        return error(str(exc), 2)
    if args.report_as_json:
        sys.stdout.write(json.dumps(recording_document(report), indent=2) + "\n")
    else:
        sys.stdout.write(render_recording_report(report))
    sys.stdout.flush()
    return 0


def report_live(args: argparse.Namespace, seconds: float) -> int:
    """``gputop report --pid``: watch the live job for ``seconds``, then print the advisor's findings."""
    import json

    from gputop.advisor.process_use import process_use_dict, render_not_training
    from gputop.advisor.report import advice_document, render_advice
    from gputop.formatting import counted

    seen = watch(args.report_pid, seconds, checks.advisor_config(args.report_window))
    raised = seen.advisor.raised()
    if args.report_as_json:
        document = advice_document(
            args.report_pid,
            raised,
            watched_s=round(seen.watched_s, 1),
            ended=seen.ended,
            process=process_use_dict(seen.use),
        )
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        ended = f"; it ended after {seen.watched_s:.0f} s" if seen.ended else ""
        snapshots = counted(seen.snapshots, "snapshot")
        sys.stdout.write(f"PID {args.report_pid}: watched {seen.watched_s:.0f} s, {snapshots}{ended}\n")
        if not seen.use.trains:
            sys.stdout.write(render_not_training(seen.use))
        sys.stdout.write(render_advice(raised, None if seen.use.trains else "the GPU rules"))
    sys.stdout.flush()
    return 0


class Watch:
    """What a watch saw: the advisor with its findings, for how long, and whether the process ended first.

    A plain class, not a dataclass: building one costs every start of gputop a millisecond."""

    __slots__ = ("advisor", "ended", "snapshots", "use", "watched_s")

    def __init__(self, advisor: Advisor, snapshots: int, watched_s: float, ended: bool, use: ProcessUse) -> None:
        self.advisor = advisor
        self.snapshots = snapshots
        self.watched_s = watched_s
        self.ended = ended
        self.use = use
        """What the watch saw of the process: its training evidence, its GPU and host use."""


def watch(pid: int, seconds: float, config: AdvisorConfig, interval_s: float | None = None) -> Watch:
    """Snapshot ``pid`` and its training processes for ``seconds`` (or until it ends) and advise on them, every
    ``interval_s`` (default ``REPORT_EVERY_S``) or more often where the advisor's window needs it."""
    from gputop.advisor import Advisor
    from gputop.advisor.process_use import UseTally
    from gputop.advisor.report import REPORT_EVERY_S, sample_every_s
    from gputop.collect.sampler import every

    advisor = Advisor(pid, config)
    tally = UseTally(pid)
    every_s = sample_every_s(config, REPORT_EVERY_S if interval_s is None else interval_s)
    started = time.monotonic()
    snapshots = 0
    ended = False
    with contextlib.closing(every(every_s, focus_pid=pid, duration_s=seconds)) as snaps:
        for snap in snaps:
            advisor.update(snap)
            tally.add(snap)
            snapshots += 1
            host = snap.host_process(pid)
            if snap.training_view(pid) is None or host is None or host.status == "zombie":
                ended = True
                break
    return Watch(advisor, snapshots, time.monotonic() - started, ended, tally.result())
