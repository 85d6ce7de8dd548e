"""``gputop run --record``: the job's snapshots into a recording, from whichever thread takes them."""

from __future__ import annotations

from gputop.model import Snapshot
from gputop.run.console import Console
from gputop.store.recording import Recorder, RecordingError


class Sink:
    """Feeds a recording from a live view: callable with each snapshot, from any thread.

    A write error (a full disk) is said once on stderr and ends the recording, never the caller: the job and its
    dashboard go on. What was committed before stays readable.
    """

    def __init__(self, recorder: Recorder, console: Console) -> None:
        self.recorder = recorder
        self.failed = False
        self._console = console

    def __call__(self, snap: Snapshot) -> None:
        if self.failed:
            return
        try:
            self.recorder.append(snap)
        except RecordingError as exc:
            self.failed = True
            self._console.error(f"{exc}; recording stopped", 1)

    def close(self) -> None:
        try:
            self.recorder.close()
        except RecordingError as exc:
            self._console.error(str(exc), 1)
