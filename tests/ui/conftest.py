"""Fixtures for the dashboard tests: a fixed clock zone and apps fed from scripted snapshots."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import psutil
import pytest

from gputop.advisor import Advisor
from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.feed import LiveFeed
from tests.ui.scenes import ScriptedSource

USER = "alice"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clocks on screen read the same everywhere (the snapshot images depend on it)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def make_app() -> Callable[..., GputopApp]:
    """``make_app(snapshots, focus_pid=..., readonly=...)``: a dashboard run by ``alice`` over these snapshots."""

    def make(snapshots: Iterable[Snapshot], advisor: Advisor | None = None, **options: object) -> GputopApp:
        focus_pid = options.get("focus_pid")
        feed = LiveFeed(ScriptedSource(snapshots), advisor or Advisor(focus_pid))
        return GputopApp(feed, user=USER, **options)  # type: ignore[arg-type]

    return make


# A training process in miniature: a parent that starts two children named like PyTorch's DataLoader workers.
TRAINING_JOB = """
import ctypes, subprocess, sys, time
worker = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'pt_data_worker', 0, 0, 0); time.sleep(600)"
workers = [subprocess.Popen([sys.executable, "-c", worker]) for _ in range(2)]
time.sleep(600)
"""


@dataclass
class TrainingJob:
    """A real parent process and its two real ``pt_data_worker`` children."""

    parent: subprocess.Popen
    worker_pids: list[int]


@pytest.fixture
def training_job() -> Iterator[TrainingJob]:
    parent = subprocess.Popen([sys.executable, "-c", TRAINING_JOB])
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            workers = [c for c in psutil.Process(parent.pid).children() if c.name() == "pt_data_worker"]
            if len(workers) == 2:
                break
            time.sleep(0.05)
        assert len(workers) == 2, "the DataLoader-like workers did not start"
        yield TrainingJob(parent, [w.pid for w in workers])
    finally:
        for proc in [psutil.Process(parent.pid), *workers]:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        parent.wait()
        psutil.wait_procs(workers, timeout=5)
