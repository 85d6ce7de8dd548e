"""``gputop export``: the sampler thread feeding an HTTP endpoint and/or a textfile, until SIGTERM or Ctrl-C.

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
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from gputop.advisor import Advisor
from gputop.collect.sampler import Sampler, SnapshotMaker
from gputop.export.collector import Exposition, SnapshotCollector
from gputop.export.server import DEFAULT_LISTEN, MetricsServer, parse_listen, serve
from gputop.export.textfile import remove_textfile, textfile_path, write_textfile

LIVENESS_CHECK_S = 1.0


def run_exporter(listen: str | None, textfile_dir: str | None, interval_s: float, per_process: bool) -> int:
    """Serve on ``listen`` (default 127.0.0.1:9400 when no textfile is asked for) and/or write the textfile.

    Returns the exit status: 2 for a bad ``--listen`` or ``--textfile``, 1 when the address cannot be bound,
    the file cannot be written or the sampling thread died, 0 after SIGTERM, 130 after SIGINT. Every error is one
    line on stderr.
    """
    if listen is None and textfile_dir is None:
        listen = DEFAULT_LISTEN
    try:
        address = None if listen is None else parse_listen(listen)
    except ValueError as exc:
        return _error(str(exc), 2)
    if textfile_dir is not None and not os.path.isdir(textfile_dir):
        return _error(f"--textfile {textfile_dir!r} is not a directory", 2)
    return asyncio.run(_export(listen, address, textfile_dir, interval_s, per_process))


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


async def _export(
    listen: str | None,
    address: tuple[str, int] | None,
    textfile_dir: str | None,
    interval_s: float,
    per_process: bool,
) -> int:
    loop = asyncio.get_running_loop()
    wake = _Wakeups()
    loop.add_signal_handler(signal.SIGTERM, wake.stop, 0)
    loop.add_signal_handler(signal.SIGINT, wake.stop, 130)
    sampling = _SamplingThread()
    sampler = Sampler(interval_s, maker_factory=sampling.make)
    # Every training process on the machine, judged on the sampler's thread; scrapes read its latest findings.
    advisor = Advisor()
    sampler.subscribe(advisor.update)
    sampler.subscribe(lambda _snap: _call_on(loop, wake.snapshot_taken))
    server: MetricsServer | None = None
    written: Path | None = None
    try:
        if address is not None:
            collector = SnapshotCollector(lambda: sampler.latest, per_process, advice=lambda: advisor.active)
            try:
                server = await serve(Exposition(collector).render, *address)
            except OSError as exc:
                return _error(f"cannot listen on {listen}: {exc.strerror or exc}", 1)
            _say(f"serving Prometheus metrics on {server.url}")
        path: Path | None = None
        if textfile_dir is not None:
            path = textfile_path(textfile_dir)
            registry = _registry(
                SnapshotCollector(lambda: sampler.latest, per_process, report_age=False, advice=lambda: advisor.active)
            )
            _say(f"writing Prometheus metrics to {path} every {interval_s:g} s")
        sampler.start()
        while True:
            await wake.wait(LIVENESS_CHECK_S)
            if wake.status is not None:
                return wake.status
            if sampling.died():
                return _error("the sampling thread stopped; exiting rather than serving stale metrics", 1)
            if path is not None and wake.fresh:
                wake.fresh = False
                try:
                    write_textfile(registry, path)
                except OSError as exc:
                    return _error(f"cannot write {path}: {exc.strerror or exc}", 1)
                written = path
    finally:
        # Signals keep only waking the loop until this is done, so a second SIGTERM cannot cut it short.
        if server is not None:
            await server.close()
        if written is not None:
            remove_textfile(written)
        sampler.stop()


def _call_on(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Run ``callback`` on ``loop``'s thread; nothing once the loop is closed (the exporter has stopped)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A registry of gputop's metrics alone: none of prometheus-client's default process and GC metrics."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def _say(message: str) -> None:
    print(f"gputop: {message}", file=sys.stderr, flush=True)


def _error(message: str, status: int) -> int:
    print(f"gputop: error: {message}", file=sys.stderr, flush=True)
    return status
