"""Fixtures shared by the whole suite: the fake NVIDIA driver and real spawned processes."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tests.fakenvml.build import build, call_count, use_in_process
from tests.fakenvml.state import FakeState, write_state

FAST = "fast"
"""The mark of a pure test: no subprocess, no terminal, no torch job (``scripts/test -m fast``)."""
SPAWNS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty", "os.system", "pty.spawn"})
"""The audit events of a process started."""

_pure_test_running = False


def _no_process_in_a_pure_test(event: str, args: tuple[object, ...]) -> None:
    if _pure_test_running and event in SPAWNS:
        started = args[0] if args else ""
        raise RuntimeError(f"a test marked {FAST} started a process ({event}: {started!r}): pure tests start none")


os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gputop-test-state-")
"""Where every ``gputop run`` the suite starts keeps its run's summary: never the user's own state directory."""

sys.addaudithook(_no_process_in_a_pure_test)  # for the whole run (a hook cannot be removed); only pure tests fail it


@contextlib.contextmanager
def _pure(item: pytest.Item) -> Iterator[None]:
    global _pure_test_running
    _pure_test_running = item.get_closest_marker(FAST) is not None
    try:
        yield
    finally:
        _pure_test_running = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> object:
    """A test marked fast that starts a process, the fake driver's compiler included, fails: ``-m fast`` runs where
    no compiler, tmux or ssh is installed. Its setup (the fixtures it asks for) and its call are watched; not the
    teardown, where the last test of a session also ends the session's fixtures (the second user deleted)."""
    with _pure(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    with _pure(item):
        return (yield)


settings.register_profile(FAST, max_examples=10)
"""Under ``-m fast`` a property is tried on a tenth of the examples the whole suite tries (a test that asks for a
count of its own asks for a multiple of ``settings.default.max_examples``): each still runs, in a moment."""


def pytest_configure(config: pytest.Config) -> None:
    if config.option.markexpr.strip() == FAST and config.getoption("--hypothesis-profile") is None:
        settings.load_profile(FAST)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting made (modules, scenes, parameters) lives as long as the run: frozen, the garbage collector
    stops walking it at every full collection (seconds over a run)."""
    gc.collect()
    gc.freeze()


LONGEST_FIRST = (
    "tests/scenarios/",
    "tests/training/test_distributed.py",
    "tests/training/test_probe.py",
    "tests/estimate/test_accuracy.py",
    "tests/training/test_step_anatomy.py",
    "tests/demo/test_demo.py",
    "tests/security/test_exporter.py",
    "tests/training/test_run_end.py",
    "tests/estimate/test_cli.py",
    "tests/estimate/test_progress.py",
    "tests/security/test_estimate_import.py",
    "tests/training/test_run.py",
)
"""The test files that take longest, in that order (``--durations``): scripts/test hands whole files to its
pytest-xdist workers in the order they were collected, so these go first and the workers end together rather than
one running the longest file alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((n for n, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each file's tests keep their order


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m fast`` alone, a test file that never names the mark holds no pure test: it is not imported, which
    saves the imports and assertion rewriting of every test that would be deselected."""
    if config.option.markexpr.strip() != FAST or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py" or "mark.fast" in collection_path.read_text():
        return None
    return True


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
