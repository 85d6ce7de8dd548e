"""``gputop export``: the sampler thread feeding an HTTP endpoint and/or a textfile, until SIGTERM or Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from prometheus_client.registry import CollectorRegistry

from gputop.advisor import Advisor
from gputop.collect.sampler import Sampler
from gputop.export.collector import SnapshotCollector
from gputop.export.server import DEFAULT_LISTEN, MetricsServer, parse_listen, serve
from gputop.export.textfile import remove_textfile, textfile_path, write_textfile


class _Terminated(Exception):
    """SIGTERM, which is how systemd and container runtimes stop a service: clean up and exit 0."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def run_exporter(listen: str | None, textfile_dir: str | None, interval_s: float, per_process: bool) -> int:
    """Serve on ``listen`` (default 127.0.0.1:9400 when no textfile is asked for) and/or write the textfile.

    Returns the exit status: 2 for a bad ``--listen`` or ``--textfile``, 1 when the address cannot be bound
    or the file cannot be written, 0 after SIGTERM. Every error is one line on stderr.
    """
    if listen is None and textfile_dir is None:
        listen = DEFAULT_LISTEN
    try:
        address = None if listen is None else parse_listen(listen)
    except ValueError as exc:
        return _error(str(exc), 2)
    if textfile_dir is not None and not os.path.isdir(textfile_dir):
        return _error(f"--textfile {textfile_dir!r} is not a directory", 2)

    sampler = Sampler(interval_s)
    # Every training process on the machine, judged on the sampler's thread; scrapes read its latest findings.
    advisor = Advisor()
    sampler.subscribe(advisor.update)
    server: MetricsServer | None = None
    written: Path | None = None
    previous_handler = signal.signal(signal.SIGTERM, _terminate)
    try:
        if address is not None:
            try:
                collector = SnapshotCollector(lambda: sampler.latest, per_process, advice=lambda: advisor.active)
                server = serve(_registry(collector), *address)
            except OSError as exc:
                return _error(f"cannot listen on {listen}: {exc.strerror or exc}", 1)
            _say(f"serving Prometheus metrics on {server.url}")
        fresh = threading.Event()
        sampler.subscribe(lambda _snap: fresh.set())
        sampler.start()
        if textfile_dir is None:
            threading.Event().wait()
        path = textfile_path(textfile_dir)
        registry = _registry(
            SnapshotCollector(lambda: sampler.latest, per_process, report_age=False, advice=lambda: advisor.active)
        )
        _say(f"writing Prometheus metrics to {path} every {interval_s:g} s")
        while True:
            fresh.wait()
            fresh.clear()
            try:
                write_textfile(registry, path)
            except OSError as exc:
                return _error(f"cannot write {path}: {exc.strerror or exc}", 1)
            written = path
    except _Terminated:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        sampler.stop()
        if server is not None:
            server.close()
        if written is not None:
            remove_textfile(written)


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
