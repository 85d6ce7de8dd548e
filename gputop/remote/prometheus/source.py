"""The hosts of the multi-host view read from Prometheus: the ``Fleet``'s interface (``gputop.ui.hosts.feed``'s
``HostsSource``) over one thread that runs every query of ``readings.QUERIES`` once per interval.

A host is live while Prometheus's instant queries hold its series. A target Prometheus cannot scrape (``up == 0``)
that has no series is shown unreachable, with why and since when: a host already down when the view starts is
on screen from the start, not missing. When they stop (its exporter stopped answering
and Prometheus marked its series stale, or the lookback ran out), the host stays on screen as stale with the
time of its last sample, never dropped; it is live again with its next sample. When Prometheus itself does not
answer, every host is shown unreachable with the reason, and the next refresh tries again.

Times are Unix times (``clock`` is ``time.time``): a host's last sample is the time Prometheus scraped it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from gputop.remote.hostspec import HostSpec
from gputop.remote.prometheus.query import PrometheusError, Query, Sample
from gputop.remote.prometheus.readings import QUERIES, Reading, down_targets, read_fleet
from gputop.remote.status import LIVE, STALE, UNREACHABLE, HostEvent, HostStatus, stale_after

log = logging.getLogger(__name__)

FIRST_SCRAPE_GAP_S = 60.0
"""How long a host's series may stand still before its second sample shows its scrape interval (Prometheus's
default interval is 1 minute)."""
SCRAPE_FAILS = "Prometheus cannot scrape it (up == 0): its exporter is down or unreachable"
SCRAPE_GAPS = 3
"""A live host whose newest sample is this many of its scrape intervals old is shown as stale."""


def run_queries(query: Query) -> dict[str, list[Sample]]:
    """Every family's instant vector. A family Prometheus has no series of is an empty answer; a query that fails
    (the server down, an answer that is not Prometheus's) fails the refresh: ``PrometheusError``."""
    return {expr: query(expr) for expr in QUERIES}


class PrometheusFleet:
    """Every host Prometheus holds, refreshed each ``interval_s`` on a thread of its own; shaped like ``Fleet``.

    ``specs`` are the hosts found by the first refresh (``discover``); a host found later is announced by its first
    event, and the view adds it.
    """

    def __init__(
        self,
        url: str,
        query: Query,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.query = query
        self.interval_s = interval_s
        self.clock = clock
        self.specs: tuple[HostSpec, ...] = ()
        self.left_out = 0
        """Hosts beyond ``readings.MAX_HOSTS`` at the last refresh."""
        self._statuses: dict[str, HostStatus] = {}
        self._sampled: dict[str, float] = {}
        self._gaps: dict[str, float] = {}
        self._pending: list[HostEvent] = []
        self._subscribers: list[Callable[[HostEvent], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def discover(self) -> tuple[HostSpec, ...]:
        """The first refresh, run on the caller's thread: the hosts found (``specs``). Raises ``PrometheusError``
        when the server does not answer or holds no host of either exporter."""
        self._pending = self.refresh(run_queries(self.query))
        if not self._statuses:
            raise PrometheusError(
                f"Prometheus at {self.url} holds no series of gputop export or dcgm-exporter "
                "(gputop_driver_up, DCGM_FI_DEV_GPU_UTIL): is it scraping them?"
            )
        self.specs = tuple(HostSpec(name) for name in self._statuses)
        return self.specs

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        for event in self._pending:
            self._emit(event)
        self._pending = []
        self._thread = threading.Thread(target=self._run, name="gputop-prometheus", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def set_interval(self, interval_s: float) -> None:
        self.interval_s = interval_s

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                events = self.refresh(run_queries(self.query))
            except PrometheusError as exc:
                events = self.unreachable(str(exc))
            except Exception as exc:  # a fault here must not end the refreshes
                log.exception("Prometheus refresh failed")
                events = self.unreachable(f"refresh failed: {exc!r}")
            for event in events:
                self._emit(event)

    def _emit(self, event: HostEvent) -> None:
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:
                log.exception("host event subscriber failed")

    # -- the state of each host: pure over the answers and the clock ----------------------------------------------

    def refresh(self, answers: Mapping[str, list[Sample]]) -> list[HostEvent]:
        """The events of one refresh: a new snapshot for each host scraped since the last one, its status for every
        host known, stale for those whose series are gone."""
        readings, self.left_out = read_fleet(answers)
        now = self.clock()
        events = []
        seen = set()
        for reading in readings:
            seen.add(reading.name)
            events.append(self._reading(reading, now))
        for name in down_targets(answers):
            status = self._statuses.get(name)
            if name not in seen and (status is None or status.state == UNREACHABLE):
                seen.add(name)
                since = status.since if status is not None else now
                self._statuses[name] = HostStatus(name, UNREACHABLE, reason=SCRAPE_FAILS, since=since)
                if status is None or status.reason != SCRAPE_FAILS:
                    events.append(HostEvent(self._statuses[name]))
        for name, status in list(self._statuses.items()):
            if name not in seen and status.state != STALE:
                self._statuses[name] = replace(
                    status, state=STALE, reason="its series are gone from Prometheus", since=now, retry_at=None
                )
                events.append(HostEvent(self._statuses[name]))
        return events

    def _reading(self, reading: Reading, now: float) -> HostEvent:
        name, snap = reading.name, reading.snapshot
        previous = self._sampled.get(name)
        if previous is not None and snap.time > previous:
            self._gaps[name] = snap.time - previous
        gap = self._gaps.get(name, FIRST_SCRAPE_GAP_S)
        status = self._statuses.get(name) or HostStatus(name, since=now)
        fresh = previous is None or snap.time > previous or status.state != LIVE
        since = status.since if status.state == LIVE else now
        status = HostStatus(
            name,
            LIVE,
            since=since,
            last_snapshot_at=snap.time,
            stale_after_s=max(stale_after(self.interval_s), SCRAPE_GAPS * gap),
        )
        self._statuses[name] = status
        self._sampled[name] = snap.time
        return HostEvent(status, snap if fresh else None)

    def unreachable(self, reason: str) -> list[HostEvent]:
        """Every host's status while Prometheus does not answer: unreachable, why, and the next refresh."""
        now = self.clock()
        events = []
        for name, status in self._statuses.items():
            since = status.since if status.state == UNREACHABLE else now
            self._statuses[name] = replace(
                status,
                state=UNREACHABLE,
                reason=reason,
                since=since,
                retry_at=now + self.interval_s,
                failures=status.failures + 1,
            )
            events.append(HostEvent(self._statuses[name]))
        return events
