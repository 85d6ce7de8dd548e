"""Who used the host's CPUs between two process-table scans: the busiest processes by name, PID and user, and the
users whose processes were busy, each counted whole."""

from __future__ import annotations

import getpass
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gputop.collect.cpu_takers import LEAST_PERCENT, TOP_PROCESSES, cpu_takers
from gputop.collect.host import HostCollector
from gputop.collect.procstat import CLOCK_TICKS
from gputop.model import CpuUse
from tests.factories import wait_until

USERS = {1: "alice", 2: "bob"}
OWNERS = {10: 1, 11: 1, 12: 2, 13: 2}


def stat(name: str) -> bytes:
    return f"1 ({name}) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0".encode()


def takers(busy: list[tuple[float, int, str]]):
    """``cpu_takers`` over one second, each process using ``cores`` of it."""
    found = [(round(cores * CLOCK_TICKS), pid, stat(name)) for cores, pid, name in busy]
    return cpu_takers(found, 1.0, OWNERS.get, USERS.__getitem__)


@pytest.mark.fast
def test_the_busiest_processes_come_first_with_their_names_and_users():
    found = takers([(0.25, 10, "python"), (1.5, 12, "stress"), (0.5, 11, "python")])

    assert found.processes == (
        CpuUse(150.0, "bob", 12, "stress"),
        CpuUse(50.0, "alice", 11, "python"),
        CpuUse(25.0, "alice", 10, "python"),
    )
    assert found.users == (CpuUse(150.0, "bob"), CpuUse(75.0, "alice"))


@pytest.mark.fast
def test_a_user_counts_every_process_even_those_too_many_to_list():
    found = takers([(0.1, 10, "worker")] * (TOP_PROCESSES + 4) + [(0.5, 12, "stress")])

    assert len(found.processes) == TOP_PROCESSES
    assert found.users[0] == CpuUse(round(0.1 * (TOP_PROCESSES + 4) * 100, 1), "alice")


@pytest.mark.fast
def test_a_process_under_the_least_share_is_left_out_and_a_hostile_name_is_shown_not_obeyed():
    least = LEAST_PERCENT / 100
    found = takers([(least / 2, 10, "idle"), (0.5, 13, "\x1b]0;owned\x07evil")])

    assert [(p.pid, p.name) for p in found.processes] == [(13, "\\x1b]0;owned\\x07evil")]


@pytest.fixture
def hog() -> Iterator[int]:
    """A real process that spins on a CPU, named ``cpu-hog``."""
    code = "open('/proc/self/comm', 'w').write('cpu-hog')\nwhile True: pass"
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_a_real_process_that_spins_is_among_the_cpu_takers_by_name_pid_and_user(hog: int):
    collector = HostCollector()
    collector.related(())

    def seen() -> CpuUse | None:
        time.sleep(0.5)
        collector.related(())
        found = collector.host_info().cpu_takers
        return next((p for p in found.processes if p.pid == hog), None) if found else None

    # A busy machine may run more than TOP_PROCESSES spinning processes: it is among them at some scan.
    found = wait_until(seen, "the spinning process among the CPU takers", timeout_s=60)

    assert (found.name, found.user) == ("cpu-hog", getpass.getuser())
    assert found.cpu_percent >= LEAST_PERCENT
