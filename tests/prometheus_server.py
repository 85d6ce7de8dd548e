"""A real Prometheus server (Debian's ``prometheus`` package) for the tests that scrape ``gputop export`` with it:
started on a free loopback port over a config of scrape jobs, asked through its HTTP API, stopped."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.factories import DEADLINE_S

PROMETHEUS = "/usr/bin/prometheus"
SCRAPED_TIMEOUT_S = DEADLINE_S


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Prometheus:
    proc: subprocess.Popen
    port: int
    log: Path

    def query(self, expr: str) -> dict:
        """Prometheus's whole answer to an instant query (``status``, ``data`` or ``error``)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:  # a bad query is a 400 with the reason in the body
            return json.load(exc)

    def vector(self, expr: str) -> list[dict] | None:
        """The series ``expr`` selects now; None while the server is not up yet, or up but not ready (a 503 whose
        body, "Service Unavailable", is no JSON: a loaded machine starts Prometheus slowly)."""
        try:
            return self.query(expr)["data"]["result"]
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_prometheus(tmp: Path, jobs: Mapping[str, Sequence[str]]) -> Prometheus:
    """Prometheus scraping each job's targets (``host:port``) every second, its data and log in ``tmp``."""
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n"
        + "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: [{', '.join(map(repr, targets))}]\n"
            for job, targets in jobs.items()
        )
    )
    log = tmp / "prometheus.log"
    port = free_port()
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    return Prometheus(proc, port, log)


def wait_scraped(server: Prometheus, holds: Callable[[Prometheus], bool], what: str) -> None:
    """Poll until ``holds(server)``; fail the test with the end of Prometheus's log if it dies or
    ``SCRAPED_TIMEOUT_S`` passes first."""
    deadline = time.monotonic() + SCRAPED_TIMEOUT_S
    while time.monotonic() < deadline and server.proc.poll() is None:
        if holds(server):
            return
        time.sleep(0.25)
    tail = server.log.read_text()[-3000:]
    pytest.fail(f"Prometheus did not scrape {what} within {SCRAPED_TIMEOUT_S} s:\n{tail}")
