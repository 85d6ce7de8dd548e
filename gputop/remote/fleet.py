"""All the hosts of the multi-host view: one link each, their events handed to the dashboard's subscribers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from gputop.remote.hostspec import HostSpec
from gputop.remote.link import LocalLink, SshLink
from gputop.remote.status import HostEvent

log = logging.getLogger(__name__)


class Fleet:
    """Starts a connection per host and passes on their ``HostEvent``s, from the connections' threads.

    Shaped like the ``Sampler`` (``subscribe``, ``start``, ``stop``, ``set_interval``), with ``specs`` and the
    ``clock`` its statuses' times are on.
    """

    def __init__(
        self,
        specs: Sequence[HostSpec],
        interval_s: float,
        ssh_command: Sequence[str] = ("ssh",),
        ssh_options: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.specs = tuple(specs)
        self.interval_s = interval_s
        self.clock = clock
        self._subscribers: list[Callable[[HostEvent], None]] = []
        self._links: list[SshLink | LocalLink] = [
            LocalLink(spec, interval_s, self._emit, clock)
            if spec.local
            else SshLink(spec, interval_s, self._emit, ssh_command, ssh_options, clock)
            for spec in self.specs
        ]

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        for link in self._links:
            link.start()

    def stop(self) -> None:
        for link in self._links:
            link.stop()
        for link in self._links:
            link.join()

    def set_interval(self, interval_s: float) -> None:
        """The interval is fixed for the run: every remote gputop was started with it."""

    def _emit(self, event: HostEvent) -> None:
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:
                log.exception("host event subscriber failed")
