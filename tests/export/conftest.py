"""Fixtures for ``gputop export`` run as a real subprocess over the fake driver."""

from __future__ import annotations

import select
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.samples import Sample

from tests.conftest import FakeDriver
from tests.export.scrape import parse
from tests.factories import DEADLINE_S, wait_until

START_TIMEOUT_S = DEADLINE_S


@dataclass
class Exporter:
    """A running ``gputop export`` and the first line it printed (where it serves or writes)."""

    proc: subprocess.Popen
    first_line: str

    @property
    def url(self) -> str:
        return self.first_line.rsplit(" ", 1)[-1]

    @property
    def address(self) -> str:
        """HOST:PORT as Prometheus's scrape config wants it."""
        return self.url.removeprefix("http://").removesuffix("/metrics")

    def scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            return response.read().decode()

    def samples(self) -> list[Sample]:
        return parse(self.scrape())

    def wait_for(self, condition: Callable[[list[Sample]], object]) -> list[Sample]:
        """Scrape until ``condition`` holds for the samples (a fresh exporter has no snapshot yet); return them."""

        def ready() -> list[Sample] | None:
            samples = self.samples()
            return samples if condition(samples) else None

        return wait_until(ready)

    def stop(self) -> tuple[int, str]:
        """SIGTERM, as systemd sends it; returns the exit status and the rest of stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


@pytest.fixture
def driver(tmp_path) -> FakeDriver:
    """A fake driver for subprocesses only (not loaded in this process)."""
    return FakeDriver(tmp_path / "state.txt", "r550")


def start_exporter(driver: FakeDriver, *args: str) -> Exporter:
    """Start ``gputop export ARGS`` over the fake driver and wait for its first line on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "export", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=driver.env(),
    )
    ready, _, _ = select.select([proc.stderr], [], [], START_TIMEOUT_S)
    line = proc.stderr.readline() if ready else ""
    running = Exporter(proc, line.strip())
    if not line.startswith("gputop: ") or "error" in line:
        code, rest = running.stop()
        pytest.fail(f"gputop export did not start (exit status {code}): {line}{rest}")
    return running


@pytest.fixture
def exporter(driver) -> Iterator[Callable[..., Exporter]]:
    """Start ``gputop export ARGS`` over the ``driver`` fixture's fake driver; stopped at the end of the test."""
    started: list[Exporter] = []

    def start(*args: str) -> Exporter:
        running = start_exporter(driver, *args)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
