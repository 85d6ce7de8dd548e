"""The feed interface: what the dashboard app and the feed it shows say to each other.

A feed holds the newest snapshot, the history behind the sparklines and the advisor's findings, and says whether
signals may be sent to its processes and whether its interval can change. It tells the app of new snapshots
through a ``FeedClient``: ``wake`` from any thread (the app then calls ``take`` on its UI thread, once per batch),
or ``show`` on the UI thread itself. Three feeds exist: ``LiveFeed`` (gputop/ui/feed/live.py: the local sampler),
the replay's ``ReplayPlayer`` (gputop/ui/replay/player.py) and ``RemoteFeed``, one host of the multi-host view
(gputop/ui/hosts/feed.py). Nothing here imports Textual.
"""

from __future__ import annotations

from typing import Protocol

from gputop.frozen import immutable
from gputop.model import Advice, Snapshot
from gputop.ui.history import History


@immutable
class Ended:
    """The end of the job a live feed watched (``gputop run``'s): what to say, and what stays on screen."""

    message: str
    snapshot: Snapshot | None = None
    """The last snapshot taken while the job ran, shown from now on; None: the newest the feed has."""


class FeedClient(Protocol):
    """The app as a feed sees it."""

    def wake(self) -> None:
        """From any thread: new snapshots wait; the app calls ``Feed.take`` on its UI thread soon."""

    def show(self) -> None:
        """On the UI thread: show the feed's ``latest`` and ``advice`` now."""

    def ended(self, ended: Ended) -> None:
        """On the UI thread, within ``Feed.take``: the feed has ended; ``latest`` and ``advice`` are final."""


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

    def stop_soon(self) -> None:
        """On the UI thread, as the dashboard closes: begin stopping without waiting; ``stop`` then waits for it.
        The wait for a source that takes time to end (the live sampler closing NVML) then overlaps Textual's own
        way out."""

    def set_interval(self, interval_s: float) -> None: ...
