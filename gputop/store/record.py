"""``gputop record``: the sampler thread feeding a recording file until Ctrl-C, SIGTERM or the duration ends."""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
from types import FrameType

from gputop.model import Snapshot
from gputop.store.recording import DEFAULT_FLUSH_EVERY_S, Recorder, RecordingError


class _Terminated(Exception):
    """SIGTERM: commit what is pending, close the file and exit 0."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def run_recorder(
    path: str,
    interval_s: float,
    pid: int | None = None,
    duration_s: float | None = None,
    flush_every_s: float = DEFAULT_FLUSH_EVERY_S,
) -> int:
    """Record until stopped. Returns 0 when stopped or done, 2 when ``path`` cannot be created, 1 on a write error.

    Snapshots reach the main thread through a queue, so the SQLite connection and the signal handlers live there.
    """
    from gputop.collect.sampler import Sampler, SnapshotMaker

    try:
        recorder = Recorder(path, interval_s, flush_every_s=flush_every_s)
    except RecordingError as exc:
        return _error(str(exc), 2)
    fresh: queue.Queue[Snapshot] = queue.Queue()
    sampler = Sampler(interval_s, maker_factory=lambda: SnapshotMaker(focus_pid=pid))
    sampler.subscribe(fresh.put)
    previous_handler = signal.signal(signal.SIGTERM, _terminate)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        until = f" for {duration_s:g} s" if duration_s is not None else " until Ctrl-C"
        _say(f"recording to {os.fspath(path)} every {interval_s:g} s{until}")
        sampler.start()
        while deadline is None or time.monotonic() < deadline:
            wait_s = min(0.25, interval_s) if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
            try:
                recorder.append(fresh.get(timeout=wait_s))
            except queue.Empty:
                recorder.tick()
        return 0
    except (_Terminated, KeyboardInterrupt):
        return 0
    except RecordingError as exc:
        return _error(str(exc), 1)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        sampler.stop()
        try:
            while True:
                recorder.append(fresh.get_nowait())
        except (queue.Empty, RecordingError):
            pass
        try:
            recorder.close()
        except RecordingError as exc:
            _error(str(exc), 1)
        _say(f"recorded {recorder.written} snapshots to {os.fspath(path)}")


def _say(line: str) -> None:
    print(f"gputop: {line}", file=sys.stderr, flush=True)


def _error(message: str, status: int) -> int:
    print(f"gputop: error: {message}", file=sys.stderr, flush=True)
    return status


class Sink:
    """Feeds a recording from a live view (``gputop run --record``): callable with each snapshot, from any thread.

    A write error (a full disk) is said once on stderr and ends the recording, never the caller: the job and its
    dashboard go on. What was committed before stays readable.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.failed = False

    def __call__(self, snap: Snapshot) -> None:
        if self.failed:
            return
        try:
            self.recorder.append(snap)
        except RecordingError as exc:
            self.failed = True
            _error(f"{exc}; recording stopped", 1)

    def close(self) -> None:
        try:
            self.recorder.close()
        except RecordingError as exc:
            _error(str(exc), 1)
