"""The multi-host view: the dashboard app over a ``Fleet`` of hosts instead of one sampler.

Host events arrive on the connections' threads and wait in an inbox that keeps one per host (the newest status
and snapshot): the UI thread takes them in batches, and a host that floods, or a terminal that is slow, costs
one event per host per batch. Each host is a ``RemoteFeed`` with its own history and advisor, fed with every
snapshot it takes, so opening a host shows its full dashboard with graphs and findings at once: ``HostsView``,
the app's feed and mode, passes on that host's snapshot, history and findings while it is open, and the
existing dashboard, detail and training screens read them as usual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from textual.screen import Screen

from gputop.model import Advice, Snapshot
from gputop.remote.hostspec import LOCAL, HostSpec
from gputop.remote.options import HostsRequest
from gputop.remote.status import HostEvent, coalesce
from gputop.ui.app import GputopApp, Mode, dashboard_help_groups
from gputop.ui.feed import FeedClient
from gputop.ui.feed.inbox import Inbox
from gputop.ui.history import History
from gputop.ui.hosts.feed import HostsSource, RemoteFeed
from gputop.ui.hosts.screens import HostDashboardScreen, HostsScreen
from gputop.ui.hosts.section import HostShown
from gputop.ui.keys import HelpGroup


class HostsView(Mode):
    """Every host on one screen; ⏎ opens one host's full dashboard, Esc comes back. Signals are for the local host
    only (and not with ``--readonly``). The app's ``Feed`` (the open host's, passed on) and its ``Mode``."""

    interval_fixed = True
    """Every remote gputop streams at the interval it was started with, so the view's interval is fixed."""

    def __init__(self, fleet: HostsSource) -> None:
        self.fleet = fleet
        self.clock = fleet.clock
        self.feeds = {spec.name: RemoteFeed(spec) for spec in fleet.specs}
        self.opened: str | None = None
        """The host whose dashboard is open, if any."""
        self._none_open = RemoteFeed(HostSpec(LOCAL))
        """What the dashboard reads while no host is open: nothing."""
        self._listeners: list[Callable[[], None]] = []
        self._client: FeedClient | None = None
        self._events: Inbox[HostEvent] = Inbox(self._wake, key=lambda e: e.name, merge=coalesce)
        self._ui_thread: int | None = None

    # -- Feed: the open host's ----------------------------------------------------------------------------------

    @property
    def shown(self) -> RemoteFeed:
        return self.feeds[self.opened] if self.opened is not None else self._none_open

    @property
    def latest(self) -> Snapshot | None:
        return self.shown.latest

    @property
    def history(self) -> History:
        return self.shown.history

    @property
    def advice(self) -> tuple[Advice, ...]:
        return self.shown.advice

    @property
    def signals_allowed(self) -> bool:
        return self.shown.signals_allowed

    def start(self, client: FeedClient) -> None:
        self._client = client
        self._ui_thread = threading.get_ident()
        self.fleet.subscribe(self._host_event)
        self.fleet.start()

    def stop(self) -> None:
        self.fleet.stop()

    def stop_soon(self) -> None:
        """The connections end in ``stop``, on the UI thread, as they always did."""

    def set_interval(self, interval_s: float) -> None:
        self.fleet.set_interval(interval_s)

    def _wake(self) -> None:
        if self._client is not None:
            self._client.wake()

    def _host_event(self, event: HostEvent) -> None:
        """Runs on a connection's thread: queue the event and wake the UI thread if it is not already awake. A
        source that delivers on the UI thread itself (a scripted one) hands nothing over: each event is taken as
        it comes, none merged into the next."""
        if threading.get_ident() == self._ui_thread:
            self._take([event])
        else:
            self._events.put(event)

    def take(self) -> bool:
        self._take(self._events.drain())
        return False  # the open host's snapshot, if any, is shown already

    def _take(self, batch: Iterable[HostEvent]) -> None:
        opened_changed = False
        for event in batch:
            feed = self.feeds.get(event.name)
            if feed is None:  # a host a discovering source (Prometheus) found after the start
                feed = self.feeds[event.name] = RemoteFeed(HostSpec(event.name))
            feed.take_event(event)
            opened_changed |= event.name == self.opened and event.snapshot is not None
        paused = self.app.paused
        if opened_changed and self.opened is not None and not paused:
            self.app.show()
        if not paused:
            self.hosts_changed()

    # -- Mode -------------------------------------------------------------------------------------------------

    def main_screen(self) -> Screen[None]:
        return HostsScreen(self)

    def toggle_pause(self) -> None:
        super().toggle_pause()
        if not self.app.paused:
            self.hosts_changed()

    def help_groups(self) -> list[HelpGroup]:
        if self.opened is None:
            return [HostsScreen.BINDINGS, GputopApp.BINDINGS]
        return [*dashboard_help_groups(), HostDashboardScreen.BINDINGS]

    # -- the hosts --------------------------------------------------------------------------------------------

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each batch of host events shown (and on play); returns what stops it."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)

    def hosts_changed(self) -> None:
        for callback in list(self._listeners):
            callback()

    def hosts_shown(self) -> list[HostShown]:
        return [HostShown(name, feed.status, feed.latest, feed.history) for name, feed in self.feeds.items()]

    def open_host(self, name: str) -> None:
        """Show ``name``'s full dashboard: its snapshots, history and findings become the dashboard's."""
        feed = self.feeds[name]
        if feed.latest is None:
            self.app.notify(f"{name} has sent no snapshot yet", title=name, severity="warning")
            return
        self.opened = name
        self.app.show()
        self.app.push_screen(HostDashboardScreen(self, name))

    def close_host(self) -> None:
        if self.opened is not None and isinstance(self.app.screen, HostDashboardScreen):
            self.opened = None
            self.app.pop_screen()


def hosts_app(
    fleet: HostsSource, interval_s: float = 1.0, readonly: bool = False, user: str | None = None
) -> GputopApp:
    """The dashboard app over every host of ``fleet``."""
    view = HostsView(fleet)
    return GputopApp(view, view, interval_s=interval_s, readonly=readonly, user=user)


def run_hosts(request: HostsRequest, interval_s: float, readonly: bool) -> int:
    """Run the multi-host view until the user quits; returns the exit status."""
    from gputop.remote.fleet import Fleet

    return run_fleet(Fleet(request.specs, interval_s, request.ssh_command, request.ssh_options), interval_s, readonly)


def run_fleet(fleet: HostsSource, interval_s: float, readonly: bool) -> int:
    """Run the multi-host view over ``fleet`` until the user quits; returns the exit status."""
    app = hosts_app(fleet, interval_s=interval_s, readonly=readonly)
    try:
        app.run()
    finally:
        fleet.stop()
    return app.return_code or 0
