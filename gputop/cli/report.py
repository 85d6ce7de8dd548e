"""``gputop report``: the advisor's findings on a live job watched for N seconds, or over a recording.

The findings as text and as JSON documents are ``gputop.advisor.report``'s.
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


def add_parser(commands: Any) -> None:
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
    return report_file(args) if watch_s is None else report_live(args, watch_s)


def report_file(args: argparse.Namespace) -> int:
    """``gputop report FILE``: the advisor over the whole recording."""
    import json

    from gputop.advisor.report import recording_document, render_recording_report, report_recording
    from gputop.store import RecordingError, open_recording

    try:
        with open_recording(args.report_file) as recording:
            report = report_recording(recording, args.report_pid, checks.advisor_config(args.report_window))
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
