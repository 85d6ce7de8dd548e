"""The multi-host view: ``GputopApp`` over a ``Fleet`` of hosts instead of one sampler.

Host events arrive on the connections' threads and wait in an inbox that keeps one per host (the newest status
and snapshot): the UI thread takes them in batches, and a host that floods, or a terminal that is slow, costs
one event per host per batch. Each host keeps its own history and advisor, fed with every snapshot it takes, so
opening a host shows its full dashboard with graphs and findings at once: the app's ``snapshot``, ``history``
and ``advisor`` become that host's while it is open, and the existing dashboard, detail and training screens
read them as usual.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import var

from gputop.advisor import Advisor
from gputop.model import Advice, Snapshot
from gputop.remote.hostspec import HostSpec
from gputop.remote.options import HostsRequest
from gputop.remote.status import HostEvent, HostStatus, coalesce
from gputop.ui.app import GputopApp, key_help
from gputop.ui.history import History
from gputop.ui.inbox import Inbox
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.hosts import HostDashboardScreen, HostsScreen
from gputop.ui.widgets.host_section import HostShown

log = logging.getLogger(__name__)

FIXED_INTERVAL_ACTIONS = ("slower", "faster")
"""Every remote gputop streams at the interval it was started with, so the view's interval is fixed."""


class HostsSource(Protocol):
    """What the view reads hosts from: the live ``Fleet``, or a scripted one in tests and screenshots."""

    specs: tuple[HostSpec, ...]
    clock: Callable[[], float]

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def set_interval(self, interval_s: float) -> None: ...


class HostFeed:
    """One host as the view keeps it: its status, its latest snapshot, and the history and advisor behind its
    dashboard."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        self.status = HostStatus(spec.name)
        self.latest: Snapshot | None = None
        self.history = History()
        self.advisor = Advisor()
        self.advice: tuple[Advice, ...] = ()

    def take(self, event: HostEvent) -> None:
        self.status = event.status
        snap = event.snapshot
        if snap is None:
            return
        self.latest = snap
        self.history.record(snap)
        try:
            self.advice = self.advisor.update(snap)
        except Exception as exc:  # a fault in one rule must not take the view down
            log.error("advisor failed on %s: %r", self.spec.name, exc)


class HostsApp(GputopApp):
    """Every host on one screen; ⏎ opens one host's full dashboard, Esc comes back. Signals are for the local host
    only (and not with ``--readonly``)."""

    hosts_generation: var[int] = var(0)
    """Counts the batches of host events shown; the hosts screen redraws on it."""

    class HostEventsArrived(Message):
        """Wakes the UI thread: there are host events in the inbox."""

    def __init__(
        self, fleet: HostsSource, interval_s: float = 1.0, readonly: bool = False, user: str | None = None
    ) -> None:
        super().__init__(fleet, interval_s=interval_s, readonly=readonly, user=user)  # type: ignore[arg-type]
        self.fleet = fleet
        self.clock = fleet.clock
        self.feeds = {spec.name: HostFeed(spec) for spec in fleet.specs}
        self.readonly_everywhere = readonly
        self.opened: str | None = None
        """The host whose dashboard is open, if any."""
        self._events: Inbox[HostEvent] = Inbox(
            lambda: self.post_message(self.HostEventsArrived()), key=lambda e: e.name, merge=coalesce
        )
        self._ui_thread: int | None = None

    def on_mount(self, event: events.Mount | None = None) -> None:
        # Textual always passes the event; the default keeps the override compatible with GputopApp.on_mount.
        if event is not None:
            event.prevent_default()  # not GputopApp's: its dashboard over a single source
        self._ui_thread = threading.get_ident()
        self.push_screen(HostsScreen())
        self.fleet.subscribe(self._host_event)
        self.fleet.start()

    def _host_event(self, event: HostEvent) -> None:
        """Runs on a connection's thread: queue the event and wake the UI thread if it is not already awake. A
        source that delivers on the UI thread itself (a scripted one) hands nothing over: each event is taken as
        it comes, none merged into the next."""
        if threading.get_ident() == self._ui_thread:
            self._take([event])
        else:
            self._events.put(event)

    def on_hosts_app_host_events_arrived(self, _: HostEventsArrived) -> None:
        self._take(self._events.drain())

    def _take(self, batch: Iterable[HostEvent]) -> None:
        opened_changed = False
        for event in batch:
            feed = self.feeds.get(event.name)
            if feed is None:
                continue
            feed.take(event)
            opened_changed |= event.name == self.opened and event.snapshot is not None
        if opened_changed and self.opened is not None:
            feed = self.feeds[self.opened]
            self.latest = feed.latest
            self._latest_advice = feed.advice
            if not self.paused:
                self._show(feed.latest)  # type: ignore[arg-type]
        if not self.paused:
            self.hosts_generation += 1

    def hosts_shown(self) -> list[HostShown]:
        return [HostShown(name, feed.status, feed.latest, feed.history) for name, feed in self.feeds.items()]

    def open_host(self, name: str) -> None:
        """Show ``name``'s full dashboard: its snapshots, history and findings become the app's."""
        feed = self.feeds[name]
        if feed.latest is None:
            self.notify(f"{name} has sent no snapshot yet", title=name, severity="warning")
            return
        self.opened = name
        self.history = feed.history
        self.advisor = feed.advisor
        self.readonly = self.readonly_everywhere or not feed.spec.local  # no signals to another machine
        self.latest = feed.latest
        self._latest_advice = feed.advice
        self._show(feed.latest)
        self.push_screen(HostDashboardScreen(name))

    def close_host(self) -> None:
        if self.opened is not None and isinstance(self.screen, HostDashboardScreen):
            self.opened = None
            self.pop_screen()

    def action_toggle_pause(self) -> None:
        super().action_toggle_pause()
        if not self.paused:
            self.hosts_generation += 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action not in FIXED_INTERVAL_ACTIONS

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        fixed = {"+", "-"}
        if self.opened is None:
            rows = [(b.key_display or b.key, b.tooltip) for b in _described(HostsScreen.BINDINGS)]
            rows += [(keys, what) for keys, what in key_help(True) if keys in ("q", "?", "p")]
        else:
            rows = [(keys, what) for keys, what in key_help(self.readonly) if keys not in fixed]
            rows += [(b.key_display or b.key, b.tooltip) for b in _described(HostDashboardScreen.BINDINGS)]
        self.push_screen(HelpScreen(rows))


def _described(bindings: Sequence[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding) and b.tooltip]


def run_hosts(request: HostsRequest, interval_s: float, readonly: bool) -> int:
    """Run the multi-host view until the user quits; returns the exit status."""
    from gputop.remote.fleet import Fleet

    fleet = Fleet(request.specs, interval_s, request.ssh_command, request.ssh_options)
    app = HostsApp(fleet, interval_s=interval_s, readonly=readonly)
    try:
        app.run()
    finally:
        fleet.stop()
    return app.return_code or 0
