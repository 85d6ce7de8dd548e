"""Fixtures shared by the whole suite: the fake NVIDIA driver and real spawned processes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakenvml.build import build, call_count, use_in_process
from tests.fakenvml.state import FakeState, write_state


@dataclass
class FakeDriver:
    """The fake libnvidia-ml.so.1 and the state file it serves."""

    state_path: Path
    profile: str
    lib: ctypes.CDLL | None = None

    def calls(self, function: str) -> int:
        """How often the in-process fake has been asked for ``function`` since it was loaded."""
        assert self.lib is not None, "calls() needs the driver loaded in this process"
        return call_count(self.lib, function)

    def write(self, state: FakeState) -> None:
        write_state(self.state_path, state)

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should load this fake driver."""
        return {
            **os.environ,
            "LD_LIBRARY_PATH": str(build(self.profile)),
            "FAKE_NVML_STATE": str(self.state_path),
            "PYTHONUNBUFFERED": "1",
        }


@pytest.fixture
def fake_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeDriver]:
    """Load the fake driver in this process (``profile``) serving ``state``; returns a handle to change it."""

    def load(state: FakeState | None = None, profile: str = "r550") -> FakeDriver:
        driver = FakeDriver(tmp_path / f"nvml-state-{profile}.txt", profile)
        driver.write(state or FakeState())
        monkeypatch.setenv("FAKE_NVML_STATE", str(driver.state_path))
        driver.lib = use_in_process(profile)
        return driver

    return load


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start real processes (killed at the end of the test) for psutil to see."""
    started: list[subprocess.Popen] = []

    def start(code: str = "import time; time.sleep(300)") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A list to put started processes in; each is killed at the end of the test."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()
