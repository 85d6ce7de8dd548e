"""``gputop export``'s service: the sampler thread feeding an HTTP endpoint and/or a textfile, until SIGTERM or Ctrl-C.

The main thread runs one event loop: it serves every HTTP connection, writes the textfile after each snapshot,
and takes SIGTERM and SIGINT. A signal only wakes the loop (asyncio's handler writes to a self-pipe), so it is
seen at once even when the kernel delivers it to another thread, and stopping never starts in the middle of other
code: the loop stops serving, removes the textfile, stops the sampler and returns. Every second the loop also
checks that the sampling thread still runs; if it has died, the exporter exits with status 1 rather than serve
the last snapshot forever (a service manager restarts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from gputop.advisor import Advisor, AdvisorConfig
from gputop.collect.sampler import Sampler, SnapshotMaker
from gputop.export.collector import Exposition, SnapshotCollector
from gputop.export.server import MetricsServer, serve
from gputop.export.textfile import remove_textfile, textfile_path, write_textfile

LIVENESS_CHECK_S = 1.0


class ExportError(Exception):
    """Why the exporter stopped early, one line, and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _Wakeups:
    """Why the main loop wakes up: a stop signal, a fresh snapshot, or the periodic check (neither)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.status: int | None = None
        self.fresh = False

    def stop(self, status: int) -> None:
        if self.status is None:
            self.status = status
        self._event.set()

    def snapshot_taken(self) -> None:
        self.fresh = True
        self._event.set()

    async def wait(self, timeout_s: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout_s)
        self._event.clear()


class _SamplingThread:
    """The sampler's thread, caught in the maker factory that ``Sampler`` runs on it, so the exporter can tell
    when it has died (an exception the sampler does not catch ends it for good)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def make(self) -> SnapshotMaker:
        self._thread = threading.current_thread()
        return SnapshotMaker()

    def died(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()


async def export(
    listen: str | None,
    address: tuple[str, int] | None,
    textfile_dir: str | None,
    interval_s: float,
    per_process: bool,
    say: Callable[[str], None],
    config: AdvisorConfig | None = None,
    dcgm_labels: bool = False,
) -> int:
    """Serve on ``address`` (``listen`` as given) and/or write the textfile into ``textfile_dir`` until SIGTERM
    (returns 0) or SIGINT (130). Raises ``ExportError`` when the address cannot be bound, the file cannot be
    written or the sampling thread died (status 1); ``say`` gets what is served and written where; ``config``: the
    advisor's window; ``dcgm_labels``: dcgm-exporter's label names on the GPU series too."""
    loop = asyncio.get_running_loop()
    wake = _Wakeups()
    loop.add_signal_handler(signal.SIGTERM, wake.stop, 0)
    loop.add_signal_handler(signal.SIGINT, wake.stop, 130)
    sampling = _SamplingThread()
    sampler = Sampler(interval_s, maker_factory=sampling.make)
    # Every training process on the machine, judged on the sampler's thread; scrapes read its latest findings.
    advisor = Advisor(None, config)
    sampler.subscribe(advisor.update)
    sampler.subscribe(lambda _snap: _call_on(loop, wake.snapshot_taken))
    server: MetricsServer | None = None
    written: Path | None = None
    hostname = dcgm_hostname() if dcgm_labels else None
    try:
        if address is not None:
            collector = SnapshotCollector(
                lambda: sampler.latest, per_process, advice=lambda: advisor.active, dcgm_hostname=hostname
            )
            try:
                server = await serve(
                    Exposition(collector).render, *address, say, ready=lambda: sampler.latest is not None
                )
            except OSError as exc:
                raise ExportError(f"cannot listen on {listen}: {_bind_failure(exc)}", 1) from None
            say(f"serving Prometheus metrics on {server.url}")
        path: Path | None = None
        if textfile_dir is not None:
            path = textfile_path(textfile_dir)
            registry = _registry(
                SnapshotCollector(
                    lambda: sampler.latest,
                    per_process,
                    report_age=False,
                    advice=lambda: advisor.active,
                    dcgm_hostname=hostname,
                )
            )
            say(f"writing Prometheus metrics to {path} every {interval_s:g} s")
        sampler.start()
        while True:
            await wake.wait(LIVENESS_CHECK_S)
            if wake.status is not None:
                return wake.status
            if sampling.died():
                raise ExportError("the sampling thread stopped; exiting rather than serving stale metrics", 1)
            if path is not None and wake.fresh:
                wake.fresh = False
                try:
                    write_textfile(registry, path)
                except OSError as exc:
                    raise ExportError(f"cannot write {path}: {exc.strerror or exc}", 1) from None
                written = path
    finally:
        # Signals keep only waking the loop until this is done, so a second SIGTERM cannot cut it short.
        if server is not None:
            await server.close()
        if written is not None:
            remove_textfile(written)
        sampler.stop()


def dcgm_hostname() -> str:
    """The ``Hostname`` label as dcgm-exporter gives it: the node's name where the DaemonSet sets ``NODE_NAME`` (in
    a pod, the host name is the pod's), else this machine's host name."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


def _bind_failure(exc: OSError) -> str:
    """Why the address cannot be served, and for a port in use, the option that serves elsewhere."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        return f"{reason} (another program serves there: give a free port with --listen HOST:PORT)"
    return reason


def _call_on(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Run ``callback`` on ``loop``'s thread; nothing once the loop is closed (the exporter has stopped)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A registry of gputop's metrics alone: none of prometheus-client's default process and GC metrics."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
