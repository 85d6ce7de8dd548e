"""The signal dialog never hits a stranger that inherited the PID of the process on screen.

The attack: the screen shows a process (here, paused), the process exits, another process is started with the
same PID, and the user, still reading the old row, sends SIGKILL. The PID is reused for real: as root, the
kernel's ``ns_last_pid`` is set so that the next process started gets the freed PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
import pytest

from gputop.ui.app import GputopApp
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.signals import ProcessHandle
from tests.ui.conftest import make_app  # noqa: F401
from tests.ui.test_signals import select, with_victim

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


def _start_with_pid(pid: int, tries: int = 50) -> subprocess.Popen:
    """A new process whose PID is ``pid`` (free now): the kernel hands out ``ns_last_pid + 1`` next."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("reusing a PID needs root (ns_last_pid)")
        pytest.skip("reusing a PID needs root (ns_last_pid)")
    for _ in range(tries):  # another process on the machine may take the PID first: try again
        with open(NS_LAST_PID, "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(SLEEPER)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    pytest.fail(f"could not get PID {pid} again in {tries} tries")


@pytest.fixture
def reused() -> Callable[[], tuple[int, float, subprocess.Popen]]:
    """A process that is shown and then exits, and the stranger that then gets its PID."""
    started: list[subprocess.Popen] = []

    def make() -> tuple[int, float, subprocess.Popen]:
        victim = subprocess.Popen(SLEEPER)
        shown_start = psutil.Process(victim.pid).create_time()
        victim.kill()
        victim.wait()
        time.sleep(0.05)
        stranger = _start_with_pid(victim.pid)
        started.append(stranger)
        return victim.pid, shown_start, stranger

    yield make
    for proc in started:
        proc.kill()
        proc.wait()


async def test_sigkill_from_a_paused_screen_spares_the_process_that_reused_the_pid(
    make_app: Callable[..., GputopApp],  # noqa: F811
    reused: Callable[[], tuple[int, float, subprocess.Popen]],
) -> None:
    victim = subprocess.Popen(SLEEPER)
    snapshot = with_victim(victim.pid)  # the row as sampled while the first process lived
    app = make_app([snapshot])
    shown: list[str] = []
    app.notify = lambda message, **kw: shown.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, victim.pid)
        await pilot.press("p")  # paused: the row stays while the world moves on
        victim.kill()
        victim.wait()
        stranger = _start_with_pid(victim.pid)
        try:
            await pilot.press("k", "K")
            await pilot.pause()
            assert isinstance(app.screen, DashboardScreen)
            assert stranger.poll() is None, "the stranger that reused the PID was killed"
        finally:
            stranger.kill()
            stranger.wait()
    assert shown and "now belongs to another process" in shown[0], shown


def test_the_handle_refuses_a_reused_pid_even_when_pinned_to_it(
    reused: Callable[[], tuple[int, float, subprocess.Popen]],
) -> None:
    pid, shown_start, stranger = reused()
    handle = ProcessHandle(pid, shown_start)  # the pidfd now pins the stranger
    try:
        error = handle.send(signal.SIGKILL)
    finally:
        handle.close()
    assert error is not None and "now belongs to another process" in error
    assert stranger.poll() is None


def test_the_process_shown_is_still_signalled(reused: Callable[[], tuple[int, float, subprocess.Popen]]) -> None:
    pid, _, stranger = reused()
    handle = ProcessHandle(pid, psutil.Process(pid).create_time())
    try:
        assert handle.send(signal.SIGTERM) is None
    finally:
        handle.close()
    assert stranger.wait(5) == -signal.SIGTERM


def test_a_row_without_a_start_time_is_not_signalled(
    reused: Callable[[], tuple[int, float, subprocess.Popen]],
) -> None:
    pid, _, stranger = reused()
    handle = ProcessHandle(pid, None)
    try:
        assert "start time" in (handle.send(signal.SIGKILL) or "")
    finally:
        handle.close()
    assert stranger.poll() is None
