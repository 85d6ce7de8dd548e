"""The advisor over a sequence of snapshots (a recording): its findings at every snapshot, and when each held.

``advise`` feeds every snapshot, in order, to one ``Advisor``, exactly as the live dashboard and ``gputop run``
do, so a recording's findings are the ones the live advisor gave (all times come from the snapshots). ``gputop
report FILE`` prints the spans; ``gputop replay`` shows the findings active at the snapshot on screen.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gputop.advisor.engine import Advisor, by_urgency
from gputop.advisor.window import AdvisorConfig
from gputop.frozen import immutable
from gputop.model import Advice, Snapshot


@immutable
class Span:
    """One stretch during which a finding was active: from the snapshot that raised it to the one that cleared
    it (``end`` None: still active at the last snapshot). ``advice`` is its form at the end of the stretch."""

    advice: Advice
    start: float
    end: float | None

    def duration_s(self, last_time: float) -> float:
        return (self.end if self.end is not None else last_time) - self.start


@immutable
class Finding:
    """Everything the advisor said about one problem (one rule, one process) over the whole sequence."""

    advice: Advice
    """Its latest form: the measurements and the suggestion as they were when it last held."""
    spans: tuple[Span, ...]
    active: bool
    """Still active at the last snapshot."""

    def held_s(self, last_time: float) -> float:
        return sum(span.duration_s(last_time) for span in self.spans)


@dataclass
class AdviceTimeline:
    """The findings at each snapshot of a sequence (``active[i]`` for the snapshot at ``times[i]``)."""

    times: list[float] = field(default_factory=list)
    active: list[tuple[Advice, ...]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    """Every finding raised, most urgent first, those still active before those that cleared."""
    failed: str | None = None
    """Why the advisor stopped early (a fault in a rule), or None."""

    def __len__(self) -> int:
        return len(self.times)

    def at(self, index: int) -> tuple[Advice, ...]:
        """The findings active after the snapshot at ``index``, most urgent first."""
        return self.active[index] if 0 <= index < len(self.active) else ()

    def index_at(self, time: float) -> int:
        """The index of the last snapshot at or before ``time`` (the first one for an earlier time)."""
        return max(0, bisect.bisect_right(self.times, time) - 1)


def advise(
    snapshots: Iterable[Snapshot], pid: int | None = None, config: AdvisorConfig | None = None
) -> AdviceTimeline:
    """Run the advisor over ``snapshots`` in order; ``pid`` is the job to judge (None: every training process)."""
    advisor = Advisor(pid, config)
    timeline = AdviceTimeline()
    opened: dict[tuple[int, str], tuple[float, Advice]] = {}
    spans: dict[tuple[int, str], list[Span]] = {}
    latest: dict[tuple[int, str], Advice] = {}
    now = 0.0
    for snap in snapshots:
        now = snap.time
        try:
            active = advisor.update(snap)
        except Exception as exc:  # a fault in one rule: keep the findings so far, say why there are no more
            timeline.failed = f"the advisor failed at {now:.0f}: {exc!r}"
            break
        # A finding unchanged since the last snapshot is kept once, and so is an unchanged set of them: a day's
        # recording holds a few hundred thousand of these.
        active = tuple(latest[(a.pid, a.id)] if latest.get((a.pid, a.id)) == a else a for a in active)
        if timeline.active and active == timeline.active[-1]:
            active = timeline.active[-1]
        timeline.times.append(now)
        timeline.active.append(active)
        current = {(a.pid, a.id): a for a in active}
        for key, advice in current.items():
            latest[key] = advice
            if key not in opened:
                opened[key] = (now, advice)
        for key in [k for k in opened if k not in current]:
            start, _ = opened.pop(key)
            spans.setdefault(key, []).append(Span(latest[key], start, now))
    for key, (start, _) in opened.items():
        spans.setdefault(key, []).append(Span(latest[key], start, None))
    timeline.findings = _ordered([Finding(latest[key], tuple(found), key in opened) for key, found in spans.items()])
    return timeline


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    by_advice = {id(f.advice): f for f in findings}
    ordered = [by_advice[id(a)] for a in by_urgency([f.advice for f in findings])]
    return sorted(ordered, key=lambda f: not f.active)
