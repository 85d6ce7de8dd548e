"""The live dashboard's feed: this machine's snapshots, from a sampler's thread to the UI thread.

The command that opens the dashboard makes it over a ``Sampler`` (gputop/collect/sampler.py), or anything shaped
like one (``SnapshotSource``), and an ``Advisor``. Nothing here imports Textual.
"""

from __future__ import annotations

import logging
import threading

from gputop.advisor import Advisor
from gputop.model import Advice, Snapshot
from gputop.ui.feed.inbox import Inbox
from gputop.ui.feed.interface import Ended, FeedClient
from gputop.ui.feed.source import SnapshotSource
from gputop.ui.history import History

log = logging.getLogger(__name__)


class LiveFeed:
    """The live dashboard's feed: snapshots from a ``Sampler`` (or anything with its interface) on its thread,
    queued in an inbox that wakes the UI thread once per batch; there every snapshot goes into the history and
    through the advisor, whose findings depend on every tick.

    Where the feed watches a job (``gputop run``), ``end`` says that it ended: the feed then keeps the job's last
    snapshot and its findings for good, stops its source, and allows no signals to the processes it shows."""

    def __init__(self, source: SnapshotSource, advisor: Advisor) -> None:
        self.source = source
        self.advisor = advisor
        self.history = History()
        self.latest: Snapshot | None = None
        self.advice: tuple[Advice, ...] = ()
        self.ended: Ended | None = None
        """Set on the UI thread once the end has been taken in: nothing after it is shown."""
        self._end: Ended | None = None
        """The end as told, from any thread, until ``take`` takes it in."""
        self._client: FeedClient | None = None
        self._inbox: Inbox[Snapshot] | None = None
        self._stopping: threading.Thread | None = None

    @property
    def signals_allowed(self) -> bool:
        """Live processes of this machine, until the end: then the screen holds what they were."""
        return self.ended is None

    @property
    def interval_fixed(self) -> bool:
        return self.ended is not None

    def start(self, client: FeedClient) -> None:
        inbox: Inbox[Snapshot] = Inbox(client.wake)
        self._inbox = inbox
        self._client = client
        # Runs on the source's thread: queue the snapshot and wake the UI thread if it is not already awake.
        self.source.subscribe(inbox.put)
        self.source.start()
        if self._end is not None:  # it ended before the dashboard was up
            client.wake()

    def end(self, ended: Ended) -> None:
        """From any thread: the job has ended. The UI thread hears of it at once, and ``take`` shows it."""
        self._end = ended
        client = self._client
        if client is not None:
            client.wake()

    def take(self) -> bool:
        if self._inbox is None:
            return False
        if self.ended is not None:
            for _ in self._inbox.drain():
                pass  # taken after the end: never shown
            return False
        end = self._end
        last = end.snapshot if end is not None else None
        latest = None
        for snap in self._inbox.drain():
            if last is not None and snap.time > last.time:
                continue  # the job had ended (a zombie, or gone)
            self._take(snap)
            latest = snap
        if latest is not None:
            self.latest = latest
        if end is None:
            return latest is not None
        if last is not None:
            if self.latest is None or self.latest.time < last.time:
                self._take(last)  # told of before its turn in the inbox came
            self.latest = last
        if self.latest is None:
            return False  # nothing to keep yet: the first snapshot will be the one
        self.ended = end
        self.source.stop()
        if self._client is not None:
            self._client.ended(end)
        return True

    def _take(self, snap: Snapshot) -> None:
        self.history.record(snap)
        try:
            self.advice = self.advisor.update(snap)
        except Exception as exc:  # a fault in one rule must not take the dashboard down
            log.error("advisor failed: %r", exc)

    def stop(self) -> None:
        stopping = self._stopping
        if stopping is None:
            self.source.stop()
        else:
            stopping.join()

    def stop_soon(self) -> None:
        """The source stops on a thread of its own: the live sampler ends its tick and closes NVML, which waits out
        the driver's event wait (up to 0.25 s), while Textual ends its own threads."""
        if self._stopping is None:
            self._stopping = threading.Thread(target=self.source.stop, name="gputop-feed-stop", daemon=True)
            self._stopping.start()

    def set_interval(self, interval_s: float) -> None:
        self.source.set_interval(interval_s)
