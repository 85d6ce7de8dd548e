"""The advisor's findings as Prometheus metrics: counted per rule by default, per process on request."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputop.export.collector import SnapshotCollector
from gputop.model import INFO, WARNING, Advice, DriverInfo, Snapshot
from tests.export.scrape import parse, value
from tests.factories import host_info

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

HOST = host_info(cpu_percent=10.0)
SNAPSHOT = Snapshot(time=1_800_000_000.0, host=HOST, driver=DriverInfo("ok"))


def advice(rule: str, pid: int, severity: str = WARNING, suggest: dict | None = None) -> Advice:
    return Advice(rule, severity, "title", "detail", "action", pid, since=0.0, suggest=suggest or {})


FINDINGS = (
    advice("data-starved", 4242, suggest={"num_workers": 8}),
    advice("data-starved", 4243, suggest={"num_workers": 6}),
    advice("pin-memory-off", 4242, INFO, suggest={"pin_memory": True}),
)


def scrape(findings: tuple[Advice, ...], per_process: bool = False) -> list:
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: SNAPSHOT, per_process, advice=lambda: findings))
    return parse(generate_latest(registry).decode())


def test_by_default_each_finding_counts_the_processes_that_have_it_without_their_pids():
    samples = scrape(FINDINGS)

    assert value(samples, "gputop_advice_active", id="data-starved", severity=WARNING) == 2
    assert value(samples, "gputop_advice_active", id="pin-memory-off", severity=INFO) == 1
    assert not [s for s in samples if "pid" in s.labels]
    assert value(samples, "gputop_advice_suggested_value") is None


def test_per_process_each_finding_is_a_series_with_its_pid_and_its_numbers():
    samples = scrape(FINDINGS, per_process=True)

    assert value(samples, "gputop_advice_active", id="data-starved", severity=WARNING, pid="4243") == 1
    assert value(samples, "gputop_advice_suggested_value", id="data-starved", pid="4242", setting="num_workers") == 8
    assert value(samples, "gputop_advice_suggested_value", setting="pin_memory") is None  # not a number


def test_no_findings_no_series():
    samples = scrape(())

    assert not [s for s in samples if s.name.startswith("gputop_advice")]
