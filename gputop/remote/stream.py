"""A remote host's stdout made into snapshots, in bounded time and memory whatever the host sends.

``LineReader`` splits the bytes into lines: only new bytes are searched for a newline, and a line longer than
``MAX_LINE_BYTES`` is dropped (up to its newline) and counted instead of held. ``SnapshotStream`` decodes the lines,
at most ``DECODES_PER_INTERVAL`` per interval (in bursts of up to ``BURST_LINES``): a host that sends faster than
it was asked to has its older lines dropped unread and counted, and its newest one read when the budget allows.
A line that is not a snapshot (whatever the decoder raises on it) is counted and skipped. The decoder
(``gputop.codec.snapshot_from_json``) makes every text of a snapshot printable, so no escape sequence from another
machine reaches the terminal; the start of a bad line, kept to say what the host sent, is made printable here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gputop.model import Snapshot
from gputop.sanitize import printable

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 8 * 1024 * 1024
"""Far above any real snapshot (a few KB per GPU and per process), far below what would hurt the dashboard."""
DECODES_PER_INTERVAL = 2
"""A remote gputop sends one snapshot per interval; twice that leaves room for jitter."""
BURST_LINES = 10
"""Lines read at once after a stall (a link that held back a few intervals' snapshots delivers them together)."""
FIRST_BAD_CHARS = 80


class LineReader:
    """Bytes in, in chunks of any size; complete lines out, without their newline.

    Holds at most ``max_line_bytes`` of an unfinished line. A longer line is counted in ``too_long`` as soon as it
    passes the limit, and everything up to its newline is dropped; the line after it is read as usual.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.too_long = 0
        self._parts: list[bytes] = []
        self._held = 0
        self._skipping = False
        """Inside a line that went over the limit: drop bytes until its newline."""

    @property
    def buffered(self) -> int:
        """Bytes held of the unfinished line."""
        return self._held

    def feed(self, data: bytes) -> list[bytes]:
        lines = []
        start = 0
        end = data.find(b"\n")
        while end >= 0:
            if self._skipping:
                self._skipping = False
            elif self._held + end - start > self.max_line_bytes:
                self.too_long += 1
            else:
                lines.append(b"".join([*self._parts, data[start:end]]) if self._parts else data[start:end])
            self._parts.clear()
            self._held = 0
            start = end + 1
            end = data.find(b"\n", start)
        rest = len(data) - start
        if rest and not self._skipping:
            if self._held + rest > self.max_line_bytes:
                self.too_long += 1
                self._skipping = True
                self._parts.clear()
                self._held = 0
            else:
                self._parts.append(data[start:])
                self._held += rest
        return lines


class SnapshotStream:
    """One connection's stdout: bytes in (``feed``), snapshots out, every other line counted.

    ``bad`` counts the lines that were not snapshots (``too_long`` of them over the size limit), ``dropped`` those
    never read because newer ones came too fast; ``first_bad`` is the start of the first bad line, as text.
    """

    def __init__(
        self,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        from gputop.codec import snapshot_from_json  # here: the command line does not need it to start

        self._decode = snapshot_from_json
        self._reader = LineReader(max_line_bytes)
        self._clock = clock
        self._rate = DECODES_PER_INTERVAL / interval_s
        self._budget = float(BURST_LINES)
        self._budget_at = clock()
        self._held: bytes | None = None
        """The newest line not read yet, waiting for the budget."""
        self._not_snapshots = 0
        self.dropped = 0
        self.first_bad: str | None = None

    @property
    def too_long(self) -> int:
        return self._reader.too_long

    @property
    def bad(self) -> int:
        return self._not_snapshots + self._reader.too_long

    def feed(self, data: bytes) -> list[Snapshot]:
        """The snapshots of the lines ``data`` completes, as many as the budget allows, oldest first."""
        lines = [line for line in self._reader.feed(data) if line.strip()]
        if self._held is not None:
            lines.insert(0, self._held)
            self._held = None
        return self._read(lines)

    def due(self) -> list[Snapshot]:
        """The held-back line's snapshot, once the budget allows it."""
        if self._held is None:
            return []
        lines, self._held = [self._held], None
        return self._read(lines)

    def finish(self) -> list[Snapshot]:
        """The stream has ended: the held-back line is read now, whatever the budget (one line per connection)."""
        if self._held is None:
            return []
        line, self._held = self._held, None
        snap = self._snapshot(line)
        return [] if snap is None else [snap]

    def wait_s(self) -> float | None:
        """Seconds until the held-back line can be read; None when nothing is held back."""
        if self._held is None:
            return None
        return max(0.0, (1.0 - self._refill()) / self._rate)

    def _refill(self) -> float:
        now = self._clock()
        self._budget = min(float(BURST_LINES), self._budget + (now - self._budget_at) * self._rate)
        self._budget_at = now
        return self._budget

    def _read(self, lines: list[bytes]) -> list[Snapshot]:
        if not lines:
            return []
        room = int(self._refill())
        if room == 0:  # out of budget: keep the newest for later
            self.dropped += len(lines) - 1
            self._held = lines[-1]
            return []
        self.dropped += max(0, len(lines) - room)
        snaps = []
        for line in lines[-room:]:
            self._budget -= 1
            snap = self._snapshot(line)
            if snap is not None:
                snaps.append(snap)
        return snaps

    def _snapshot(self, line: bytes) -> Snapshot | None:
        try:
            return self._decode(line)
        except Exception as exc:  # whatever the decoder raises on hostile input, it is one bad line, not the end
            self._not_snapshots += 1
            if self.first_bad is None:
                self.first_bad = printable(line[:FIRST_BAD_CHARS].decode(errors="replace"))
            log.debug("not a snapshot: %r", exc)
            return None
