"""What the dashboard reads snapshots from: the live ``Sampler``, or anything shaped like it (tests, replays)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gputop.model import Snapshot


class SnapshotSource(Protocol):
    """Delivers snapshots to subscribers, from any thread, until stopped."""

    def subscribe(self, callback: Callable[[Snapshot], None]) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def set_interval(self, interval_s: float) -> None: ...
