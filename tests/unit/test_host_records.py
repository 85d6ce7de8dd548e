"""The host collector's records across ticks: a process that did not change keeps its record; one that did gets
a new one with the new values."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gputop.collect import host
from gputop.collect.host import HostCollector
from gputop.collect.procstat import ProcStat


@pytest.fixture
def sleeper() -> Iterator[int]:
    process = subprocess.Popen(["sleep", "60"])
    time.sleep(0.2)  # past its exec: asleep from here on
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def ticks(collector: HostCollector, pid: int, count: int) -> list[object]:
    records = []
    for _ in range(count):
        records.append(collector.processes([pid])[pid])
        time.sleep(0.02)
    return records


def test_a_sleeping_process_keeps_the_same_record_between_ticks(sleeper: int) -> None:
    first, second, third = ticks(HostCollector(), sleeper, 3)

    assert first.cpu_percent is None  # measuring
    assert second.cpu_percent == 0.0
    assert third is second


def test_a_process_that_ran_gets_a_new_record_with_its_cpu() -> None:
    collector = HostCollector()
    me = os.getpid()
    _, before = ticks(collector, me, 2)
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # burn CPU between two ticks
        pass
    after = collector.processes([me])[me]

    assert after is not before
    assert after.cpu_percent is not None and after.cpu_percent > 0


def test_a_refresh_of_the_slow_facts_gives_a_new_record(sleeper: int) -> None:
    collector = HostCollector(static_refresh_s=0.0)
    _, second, third = ticks(collector, sleeper, 3)

    assert third is not second and third == second


def test_a_stat_line_that_did_not_change_is_not_parsed_again(sleeper: int, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real_parse = host.parse_stat

    def counting(text: str) -> ProcStat:
        parsed.append(text)
        return real_parse(text)

    monkeypatch.setattr(host, "parse_stat", counting)
    records = ticks(HostCollector(), sleeper, 5)

    # The first tick, and the second (its CPU % measured, which makes a new record); then the same bytes.
    assert len(parsed) <= 2
    assert records[4] is records[2] and records[4].cpu_percent == 0.0


def test_related_follows_ancestors_and_descendants_of_a_root() -> None:
    # A parent with a child with a grandchild: asked about the child, the scan finds all three and this process.
    script = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import subprocess, time; "
        'g = subprocess.Popen(["sleep", "30"]); print(g.pid, flush=True); time.sleep(30)\'], '
        "stdout=subprocess.PIPE, text=True); "
        "print(c.pid, c.stdout.readline().strip(), flush=True); time.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = grandchild = 0
    try:
        child, grandchild = (int(pid) for pid in parent.stdout.readline().split())  # type: ignore[union-attr]
        found = HostCollector().related({child})
        assert {parent.pid, child, grandchild, os.getpid()} <= found
        assert 1 not in found
        upward = HostCollector().related({grandchild})
        assert parent.pid in upward and child in upward
    finally:
        for pid in (grandchild, child):
            if pid:
                os.kill(pid, 9)
        parent.kill()
        parent.wait()
