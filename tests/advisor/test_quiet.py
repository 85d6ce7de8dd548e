"""The engine asks its rules again only when what they read changed: a process whose samples hold still, tick
after tick, costs its rules nothing, and its findings are those of a rule asked at every tick."""

from __future__ import annotations

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.rules import Finding, Rule
from gputop.advisor.window import JobWindow
from gputop.model import DRIVER_OK, INFO, Advice, DriverInfo, HostProcess, Snapshot
from tests.advisor.build import GIB, PID, host, loader, view, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

WINDOW_S = 10.0
START = 1_700_000_000.0
FINDING = Finding(INFO, "title", "detail", "action", "external", {"n": 1})


def two_workers(w: JobWindow) -> bool:
    return sum(len(s.view.workers) == 2 for s in w.samples) > len(w.samples) // 2


def feed(advisor: Advisor, workers_at: dict[float, int], end: float) -> list[tuple[Advice, ...]]:
    """A snapshot every second up to ``end``; the job's worker count changes at the times ``workers_at`` gives."""
    found = []
    count = workers_at[0.0]
    for t in range(int(end) + 1):
        count = workers_at.get(float(t), count)
        training = view(loader(workers=count), workers(count))
        process = HostProcess(pid=PID, ppid=1, rss_bytes=GIB, start_time=START - 3600)
        snap = Snapshot(START + t, host(), DriverInfo(DRIVER_OK), host_processes=(process,), training=(training,))
        found.append(advisor.update(snap))
    return found


def test_a_rule_is_not_asked_again_while_the_samples_it_reads_hold_still():
    asked: list[float] = []

    def rule(w: JobWindow, config: AdvisorConfig) -> Finding | None:
        asked.append(w.latest.time)
        return None

    advisor = Advisor(PID, AdvisorConfig(window_s=WINDOW_S))
    advisor.rules = (Rule("counting", rule),)
    feed(advisor, {0.0: 1}, 200)

    assert [t for t in asked if t >= START + 100] == []


def test_a_rule_is_asked_again_once_the_samples_change():
    asked: list[float] = []

    def rule(w: JobWindow, config: AdvisorConfig) -> Finding | None:
        asked.append(w.latest.time - START)
        return None

    advisor = Advisor(PID, AdvisorConfig(window_s=WINDOW_S))
    advisor.rules = (Rule("counting", rule),)
    feed(advisor, {0.0: 1, 150.0: 2}, 160)

    assert 150 in asked


def test_findings_after_a_quiet_stretch_are_those_of_a_rule_asked_at_every_tick():
    def quiet(w: JobWindow, config: AdvisorConfig) -> Finding | None:
        return FINDING if two_workers(w) else None

    def asked_every_tick(w: JobWindow, config: AdvisorConfig) -> Finding | None:
        # A new finding at every tick: never the same verdict twice, so never left unasked.
        return Finding(INFO, "title", "detail", "action", "external", {"n": 1}) if two_workers(w) else None

    changes = {0.0: 1, 120.0: 2, 400.0: 1, 700.0: 2}
    runs = []
    for check in (quiet, asked_every_tick):
        advisor = Advisor(PID, AdvisorConfig(window_s=WINDOW_S))
        advisor.rules = (Rule("two-workers", check),)
        runs.append([[(a.id, a.since) for a in advice] for advice in feed(advisor, changes, 1000)])

    assert runs[0] == runs[1]
    assert any(runs[0])
