"""The snapshots of a recording, read on demand: the replay's source. Nothing here imports Textual."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path

from gputop.formatting import counted
from gputop.model import Snapshot
from gputop.store import Recording, RecordingError
from gputop.ui.replay.cache import SnapshotCache


class ReplayError(Exception):
    """A recording with nothing to replay: reported as one line, exit status 1."""


class ReplaySource:
    """The snapshots of a recording by position (0 = the first row): read on demand, delivered on ``seek``.

    ``times`` is the recorded time of each position, made non-decreasing (a wall clock stepped back during the
    recording would otherwise tangle the timeline); ``clock`` the times as recorded, for display.
    """

    def __init__(self, recording: Recording, index: list[tuple[int, float]] | None = None) -> None:
        self.recording = recording
        index = recording.index() if index is None else index
        self.rows = [rowid for rowid, _ in index]
        self.clock = [at for _, at in index]
        self.times: list[float] = []
        for at in self.clock:
            self.times.append(max(at, self.times[-1]) if self.times else at)
        self.position = 0
        self.unreadable: dict[int, str] = {}
        """Positions whose row could not be read, with the reason."""
        self._subscribers: list[Callable[[Snapshot], None]] = []
        self.cache = SnapshotCache()

    def __len__(self) -> int:
        return len(self.rows)

    # -- SnapshotSource ---------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Snapshot], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        """Deliver the snapshot at ``position`` (the replay's start)."""
        self.seek(self.position)

    def stop(self) -> None:
        """Nothing runs on its own: there is nothing to stop."""

    def set_interval(self, interval_s: float) -> None:
        """A recording keeps its own pace; the replay's speed scales it."""

    # -- reading ----------------------------------------------------------------------------------------------

    def read(self, position: int) -> Snapshot | None:
        """The snapshot at ``position``, or None when its row cannot be read (``unreadable`` says why)."""
        snap = self.cache.get(position)
        if snap is not None:
            return snap
        if position in self.unreadable:
            return None
        try:
            read = self.recording.read_weighed(self.rows[position])
        except RecordingError as exc:
            self.unreadable[position] = str(exc)
            return None
        self.cache.add(position, read)
        return read.snapshot

    def readable(self, position: int, direction: int = 1) -> int | None:
        """The readable position nearest to ``position`` in ``direction`` (``position`` itself first), else the
        nearest on the other side; None when no row can be read."""
        if not len(self):
            return None
        position = min(len(self) - 1, max(0, position))
        if direction >= 0:
            passes = (range(position, len(self)), range(position - 1, -1, -1))
        else:
            passes = (range(position, -1, -1), range(position + 1, len(self)))
        for candidates in passes:
            for k in candidates:
                if self.read(k) is not None:
                    return k
        return None

    def seek(self, position: int) -> None:
        """Deliver the snapshot at ``position`` (which must be readable: ``readable``) to every subscriber."""
        snap = self.read(position)
        if snap is None:
            return
        self.position = position
        for callback in self._subscribers:
            callback(snap)

    def index_at(self, at: float) -> int:
        """The last position at or before time ``at`` (the first for an earlier time)."""
        return max(0, bisect.bisect_right(self.times, at) - 1)

    def nearest(self, at: float) -> int:
        """The position whose time is nearest to ``at``."""
        after = min(len(self) - 1, bisect.bisect_left(self.times, at))
        before = max(0, after - 1)
        return before if at - self.times[before] <= self.times[after] - at else after


def recording_notices(source: ReplaySource) -> list[str]:
    """One line each for a damaged recording and one not closed by its recorder."""
    recording = source.recording
    info = recording.info
    name = Path(info.path).name
    notices = []
    damage = recording.damage or ""
    if damage:
        readable = counted(len(source), "snapshot")
        notices.append(f"{damage.replace(info.path, name)}: showing the {readable} that can be read")
    if info.ended is None:
        notices.append(
            f"{name} was not closed by its recorder (still being written, or the recorder was killed): "
            f"showing the {counted(len(source), 'snapshot')} committed when it was opened"
        )
    return notices
