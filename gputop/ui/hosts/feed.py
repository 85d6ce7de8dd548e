"""One host of the multi-host view as a dashboard ``Feed``, and what the view reads hosts from. Nothing here
imports Textual."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from gputop.advisor import Advisor
from gputop.model import Advice, Snapshot
from gputop.remote.hostspec import HostSpec
from gputop.remote.status import HostEvent, HostStatus
from gputop.ui.feed import FeedClient
from gputop.ui.history import History

log = logging.getLogger(__name__)


class HostsSource(Protocol):
    """What the view reads hosts from: the live ``Fleet``, or a scripted one in tests and screenshots."""

    specs: tuple[HostSpec, ...]
    clock: Callable[[], float]

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def set_interval(self, interval_s: float) -> None: ...


class RemoteFeed:
    """One host as the view keeps it: its status, its latest snapshot, and the history and advisor behind its
    dashboard, fed with every snapshot it takes (``take_event``) so that opening it shows graphs and findings at
    once. The view delivers its events (the fleet is the view's), so starting and stopping do nothing here."""

    interval_fixed = True
    """Every remote gputop streams at the interval it was started with."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        self.status = HostStatus(spec.name)
        self.latest: Snapshot | None = None
        self.history = History()
        self.advisor = Advisor()
        self.advice: tuple[Advice, ...] = ()

    @property
    def signals_allowed(self) -> bool:
        return self.spec.local  # no signals to another machine

    def take_event(self, event: HostEvent) -> None:
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

    def start(self, client: FeedClient) -> None:
        pass

    def take(self) -> bool:
        return False

    def stop(self) -> None:
        pass

    def stop_soon(self) -> None:
        pass

    def set_interval(self, interval_s: float) -> None:
        pass
