"""``gputop record``: a snapshot every interval appended to a new recording file, until Ctrl-C, SIGTERM or
``--duration``."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

from gputop.cli import args as checks
from gputop.cli.console import StopRequest, Terminated, error, say, stop_signals

if TYPE_CHECKING:
    from gputop.store.recording import Recorder

TICK_S = 0.25
"""How often a wait between two snapshots lets the recorder commit what is due."""


def add_parser(commands: Any) -> None:
    record = commands.add_parser(
        "record",
        help="record snapshots to a file until stopped (docs/recording.md)",
        description="Sample every interval and append each snapshot to FILE, a new SQLite recording, until Ctrl-C, "
        "SIGTERM or --duration. Snapshots are committed every 2 s, so a killed gputop loses at most the last 2 s.",
    )
    record.add_argument("-o", "--output", required=True, metavar="FILE", help="the new recording file to write")
    record.add_argument("--pid", type=checks.pid, metavar="PID", dest="record_pid", help="focus on one process")
    checks.add_interval(record, "record_interval", "seconds between snapshots (default 1.0)")
    record.add_argument("--duration", type=checks.seconds, metavar="SECONDS", help="stop after this many seconds")


def check(args: argparse.Namespace) -> None:
    if args.record_pid is not None:
        checks.check_pid_exists(args.record_pid)


def main(args: argparse.Namespace) -> int:
    pid = args.record_pid if args.record_pid is not None else args.pid
    return record(args.output, args.record_interval, pid=pid, duration_s=args.duration)


def record(
    path: str,
    interval_s: float,
    pid: int | None = None,
    duration_s: float | None = None,
    flush_every_s: float | None = None,
) -> int:
    """Record until stopped. Returns 0 when stopped or done, 2 when ``path`` cannot be created, 1 on a write error.

    Snapshots are made and written on the main thread, which also takes SIGTERM; between two, the recorder
    commits its batch every ``flush_every_s`` (default ``DEFAULT_FLUSH_EVERY_S``).
    """
    from gputop.collect.sampler import every
    from gputop.formatting import counted
    from gputop.store.recording import DEFAULT_FLUSH_EVERY_S, Recorder, RecordingError

    try:
        recorder = Recorder(path, interval_s, flush_every_s=flush_every_s or DEFAULT_FLUSH_EVERY_S)
    except RecordingError as exc:
        return error(str(exc), 2)
    try:
        with stop_signals() as stop:
            until = f" for {duration_s:g} s" if duration_s is not None else " until Ctrl-C"
            say(f"recording to {os.fspath(path)} every {interval_s:g} s{until}")
            snapshots = every(
                interval_s, focus_pid=pid, first="now", duration_s=duration_s, wait=lambda s: _wait(recorder, s, stop)
            )
            with contextlib.closing(snapshots):
                for snap in snapshots:
                    recorder.append(snap)
        return 0
    except (Terminated, KeyboardInterrupt):
        return 0
    except RecordingError as exc:
        return error(str(exc), 1)
    finally:
        try:
            recorder.close()
        except RecordingError as exc:
            error(str(exc), 1)
        say(f"recorded {counted(recorder.written, 'snapshot')} to {os.fspath(path)}")


def _wait(recorder: Recorder, timeout_s: float, stop: StopRequest) -> bool:
    """Sleep ``timeout_s``, committing the recorder's batch when it is due; True (stop) as soon as SIGTERM or
    Ctrl-C has asked, within ``TICK_S``."""
    deadline = time.monotonic() + timeout_s
    while not stop.requested and (left_s := deadline - time.monotonic()) > 0:
        time.sleep(min(TICK_S, left_s))
        recorder.tick()
    return stop.requested
