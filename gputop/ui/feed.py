"""What the dashboard shows, and how it hears of something new: a ``Feed``.

A feed holds the newest snapshot, the history behind the sparklines and the advisor's findings, and says whether
signals may be sent to its processes and whether its interval can change. It tells the app of new snapshots
through a ``FeedClient``: ``wake`` from any thread (the app then calls ``take`` on its UI thread, once per batch),
or ``show`` on the UI thread itself. Three feeds exist: ``LiveFeed`` here (the local sampler), the replay's
``ReplayPlayer`` (gputop/ui/replay/player.py) and ``RemoteFeed``, one host of the multi-host view
(gputop/ui/hosts/feed.py). Nothing here imports Textual.
"""

from __future__ import annotations

import logging
from typing import Protocol

from gputop.advisor import Advisor
from gputop.model import Advice, Snapshot
from gputop.ui.history import History
from gputop.ui.inbox import Inbox
from gputop.ui.source import SnapshotSource

log = logging.getLogger(__name__)


class FeedClient(Protocol):
    """The app as a feed sees it."""

    def wake(self) -> None:
        """From any thread: new snapshots wait; the app calls ``Feed.take`` on its UI thread soon."""

    def show(self) -> None:
        """On the UI thread: show the feed's ``latest`` and ``advice`` now."""


class Feed(Protocol):
    """Snapshots for the dashboard, with their history and findings."""

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot (the one on screen unless the display is paused)."""

    @property
    def history(self) -> History:
        """The history behind the sparklines, up to ``latest``."""

    @property
    def advice(self) -> tuple[Advice, ...]:
        """The advisor's findings as of ``latest``, most urgent first."""

    @property
    def signals_allowed(self) -> bool:
        """Whether the processes shown are live processes of this machine (``k`` may signal them)."""

    @property
    def interval_fixed(self) -> bool:
        """Whether the sampling interval is the feed's own (``+`` and ``-`` do nothing)."""

    def start(self, client: FeedClient) -> None:
        """Start delivering to ``client``."""

    def take(self) -> bool:
        """On the UI thread, after ``client.wake``: take what arrived; True when ``latest`` moved on."""

    def stop(self) -> None: ...

    def set_interval(self, interval_s: float) -> None: ...


class LiveFeed:
    """The live dashboard's feed: snapshots from a ``Sampler`` (or anything with its interface) on its thread,
    queued in an inbox that wakes the UI thread once per batch; there every snapshot goes into the history and
    through the advisor, whose findings depend on every tick."""

    signals_allowed = True
    interval_fixed = False

    def __init__(self, source: SnapshotSource, advisor: Advisor) -> None:
        self.source = source
        self.advisor = advisor
        self.history = History()
        self.latest: Snapshot | None = None
        self.advice: tuple[Advice, ...] = ()
        self._inbox: Inbox[Snapshot] | None = None

    def start(self, client: FeedClient) -> None:
        inbox: Inbox[Snapshot] = Inbox(client.wake)
        self._inbox = inbox
        # Runs on the source's thread: queue the snapshot and wake the UI thread if it is not already awake.
        self.source.subscribe(inbox.put)
        self.source.start()

    def take(self) -> bool:
        if self._inbox is None:
            return False
        latest = None
        for latest in self._inbox.drain():
            self.history.record(latest)
            try:
                self.advice = self.advisor.update(latest)
            except Exception as exc:  # a fault in one rule must not take the dashboard down
                log.error("advisor failed: %r", exc)
        if latest is None:
            return False
        self.latest = latest
        return True

    def stop(self) -> None:
        self.source.stop()

    def set_interval(self, interval_s: float) -> None:
        self.source.set_interval(interval_s)
