"""The replay's decoded snapshots, kept by count and by the memory they hold. Nothing here imports Textual."""

from __future__ import annotations

from collections import OrderedDict

from gputop.model import Snapshot
from gputop.store import WeighedSnapshot

MOST_SNAPSHOTS = 512
"""Decoded snapshots kept: more than the sparklines' five minutes at 1 s, so a step back rebuilds them from memory."""
MOST_BYTES = 128 * 1024 * 1024
"""The most memory the kept snapshots may hold, as their decoder bounds it (``gputop.codec.decoded_bytes``): a
recording of an 8-GPU training box keeps all 512 in about 40 MiB of that bound. A file whose rows each decode to
tens of MiB, every row within the limits of one snapshot, grew a replay from 245 MiB to 6 GiB when only the count
was bounded."""


class SnapshotCache:
    """Decoded snapshots by position, the least recently used dropped first once there are more than
    ``most_snapshots`` or they hold more than ``most_bytes`` (the one added last is always kept).

    A snapshot read from a row of changes shares what did not change with its whole snapshot, which it keeps
    alive whether or not that one is kept here: each whole snapshot is counted once, while any kept snapshot
    shares it (``held_bytes``)."""

    def __init__(self, most_snapshots: int = MOST_SNAPSHOTS, most_bytes: int = MOST_BYTES) -> None:
        self.most_snapshots = most_snapshots
        self.most_bytes = most_bytes
        self.held_bytes = 0
        """At most the memory the kept snapshots hold."""
        self._kept: OrderedDict[int, WeighedSnapshot] = OrderedDict()
        self._wholes: dict[int, int] = {}
        """By row, how many kept snapshots share each whole snapshot."""

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, position: int) -> Snapshot | None:
        read = self._kept.get(position)
        if read is None:
            return None
        self._kept.move_to_end(position)
        return read.snapshot

    def add(self, position: int, read: WeighedSnapshot) -> None:
        self._drop(position)
        self._kept[position] = read
        self.held_bytes += read.own_bytes
        sharing = self._wholes.get(read.whole_row, 0)
        if not sharing:
            self.held_bytes += read.whole_bytes
        self._wholes[read.whole_row] = sharing + 1
        while len(self._kept) > 1 and (len(self._kept) > self.most_snapshots or self.held_bytes > self.most_bytes):
            self._drop(next(iter(self._kept)))

    def _drop(self, position: int) -> None:
        read = self._kept.pop(position, None)
        if read is None:
            return
        self.held_bytes -= read.own_bytes
        sharing = self._wholes.pop(read.whole_row) - 1
        if sharing:
            self._wholes[read.whole_row] = sharing
        else:
            self.held_bytes -= read.whole_bytes
