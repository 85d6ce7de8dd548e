"""Findings as the JSON document (docs/json.md, "Advice") and as text, and ``gputop report``'s watch.

The document: ``{"schema": 1, "pid": PID, "advice": [...]}``, one object per finding raised during the watch,
most urgent first, those still active before those that cleared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputop.advisor.engine import Advisor
from gputop.advisor.window import AdvisorConfig
from gputop.model import Advice

SCHEMA = 1
REPORT_EVERY_S = 1.0
WINDOW_SAMPLES = 8
"""Snapshots per window at least: with fewer, one tick weighs too much in a finding's hold."""


def advice_to_dict(advice: Advice, active: bool = True) -> dict[str, Any]:
    """One finding as a JSON object; tuples in the evidence become arrays."""
    return {
        "id": advice.id,
        "severity": advice.severity,
        "title": advice.title,
        "detail": advice.detail,
        "evidence": {k: list(v) if isinstance(v, tuple) else v for k, v in advice.evidence.items()},
        "action": advice.action,
        "suggest": dict(advice.suggest),
        "source": advice.source,
        "pid": advice.pid,
        "since": advice.since,
        "active": active,
    }


def advice_document(pid: int, raised: Sequence[tuple[Advice, bool]], **extra: Any) -> dict[str, Any]:
    """The findings of a watch of ``pid``; ``extra`` keys follow them (the command, the training views...)."""
    return {"schema": SCHEMA, "pid": pid, "advice": [advice_to_dict(a, active) for a, active in raised], **extra}


def render_advice(raised: Sequence[tuple[Advice, bool]]) -> str:
    """The findings as text for a terminal or a log: a headline each, then the measurements, the change."""
    if not raised:
        return "No findings: nothing held long enough to report.\n"
    lines = []
    for advice, active in raised:
        state = "" if active else " (cleared)"
        lines.append(f"{advice.severity.upper():<8} {advice.id}{state}: {advice.title}")
        lines.append(f"         {advice.detail}")
        lines.append(f"         → {advice.action}")
        since = time.strftime("%H:%M:%S", time.localtime(advice.since))
        tail = f"PID {advice.pid}, from {advice.source}, since {since}"
        if advice.suggest:
            tail = f"suggest {advice.suggest_text}; {tail}"
        lines.append(f"         {tail}")
    return "\n".join(lines) + "\n"


def sample_every_s(config: AdvisorConfig, interval_s: float = REPORT_EVERY_S) -> float:
    """How often to snapshot: every ``interval_s``, or more often where the window would get too few snapshots."""
    return min(interval_s, config.window_s / WINDOW_SAMPLES)


@dataclass(frozen=True, slots=True)
class Watch:
    """What a watch saw: the advisor with its findings, for how long, and whether the process ended first."""

    advisor: Advisor
    snapshots: int
    watched_s: float
    ended: bool


def watch(pid: int, seconds: float, config: AdvisorConfig, interval_s: float = REPORT_EVERY_S) -> Watch:
    """Snapshot ``pid`` and its training processes for ``seconds`` (or until it ends) and advise on them."""
    from gputop.collect.sampler import SnapshotMaker

    advisor = Advisor(pid, config)
    every_s = sample_every_s(config, interval_s)
    maker = SnapshotMaker(focus_pid=pid)
    started = time.monotonic()
    snapshots = 0
    ended = False
    try:
        snap = maker.one_shot()
        while True:
            advisor.update(snap)
            snapshots += 1
            host = snap.host_process(pid)
            if snap.training_view(pid) is None or host is None or host.status == "zombie":
                ended = True
                break
            elapsed = time.monotonic() - started
            if elapsed >= seconds:
                break
            time.sleep(max(0.0, min(every_s, seconds - elapsed)))
            snap = maker.snapshot()
    finally:
        maker.close()
    return Watch(advisor, snapshots, time.monotonic() - started, ended)
