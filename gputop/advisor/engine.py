"""The advisor: feeds each training process's samples to the rules and raises and clears their findings.

A finding is raised once its rule's condition has held for ``FIRE_SHARE`` of a window (``window_s``, or
``gpu_idle_s`` for ``gpu-idle``), and cleared once it has held for ``CLEAR_SHARE`` of a window or less. Shares are
weighted by time, each evaluation standing for the interval since the one before, so irregular ticks (a replay,
a slow sampler) count for what they cover. All times come from the snapshots, so replaying a recording gives the
findings the live run gave.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from gputop.advisor import thresholds as th
from gputop.advisor.rules import RULES, Finding, Rule
from gputop.advisor.window import AdvisorConfig, JobSample, JobWindow, sample_of
from gputop.model import Advice, Snapshot, TrainingView, job_views


@dataclass
class _RuleState:
    """One rule for one process: recent evaluations ``(time, held)`` and the advice raised, if any."""

    evaluations: deque[tuple[float, bool]] = field(default_factory=deque)
    advice: Advice | None = None

    def record(self, time: float, held: bool, hold_s: float) -> float | None:
        """Add an evaluation; return the share of the last ``hold_s`` it held, or None before a whole window."""
        self.evaluations.append((time, held))
        start = time - hold_s
        while len(self.evaluations) > 1 and self.evaluations[1][0] <= start:
            self.evaluations.popleft()
        if self.evaluations[0][0] > start:
            return None
        held_s = 0.0
        previous = self.evaluations[0][0]
        for at, holds in list(self.evaluations)[1:]:
            if holds:
                held_s += at - max(previous, start)
            previous = at
        return held_s / hold_s if hold_s > 0 else float(held)


def advice_of(rule: Rule, finding: Finding, pid: int, since: float) -> Advice:
    return Advice(
        id=rule.id,
        severity=finding.severity,
        title=finding.title,
        detail=finding.detail,
        action=finding.action,
        pid=pid,
        since=since,
        source=finding.source,
        evidence=dict(finding.evidence),
        suggest=dict(finding.suggest),
    )


def by_urgency(advice: Sequence[Advice]) -> tuple[Advice, ...]:
    """Most urgent first, then the oldest."""
    return tuple(sorted(advice, key=lambda a: (-a.severity_rank, a.since, a.pid, a.id)))


class Advisor:
    """Watches the training processes of snapshots and keeps their findings.

    With ``pid`` it watches that process and the training processes below it (a ``gputop run`` job, torchrun's
    ranks); without, every training process in the snapshots (the exporter). Not thread-safe: feed it from one
    thread; ``active`` may be read from another.
    """

    def __init__(self, pid: int | None = None, config: AdvisorConfig | None = None) -> None:
        self.pid = pid
        self.config = config or AdvisorConfig()
        self.rules: tuple[Rule, ...] = RULES
        self.active: tuple[Advice, ...] = ()
        self._samples: dict[int, deque[JobSample]] = {}
        self._states: dict[tuple[int, str], _RuleState] = {}
        self._raised: dict[tuple[int, str], Advice] = {}

    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        """Take one snapshot into account; returns the findings active after it, most urgent first."""
        watched = self._views(snap)
        for view, local_ranks in watched:
            samples = self._samples.setdefault(view.pid, deque())
            samples.append(sample_of(snap, view, local_ranks))
            while samples[0].time < snap.time - self.config.history_s:
                samples.popleft()
            window = JobWindow(tuple(samples))
            for rule in self.rules:
                self._evaluate(rule, window)
        alive = {view.pid for view, _ in watched}
        for pid in set(self._samples) - alive:  # the process ended: its findings end with it
            del self._samples[pid]
            for key in [k for k in self._states if k[0] == pid]:
                del self._states[key]
            if self.pid is None:  # watching a whole machine for days: only a watched job's report keeps them
                for key in [k for k in self._raised if k[0] == pid]:
                    del self._raised[key]
        self.active = by_urgency([s.advice for s in self._states.values() if s.advice is not None])
        return self.active

    def raised(self) -> tuple[tuple[Advice, bool], ...]:
        """Every finding raised so far, in its latest form, with whether it is still active; active first.

        Watching every process (no ``pid``), the findings of processes that ended are forgotten.
        """
        active = {(a.pid, a.id) for a in self.active}
        ordered = by_urgency(list(self._raised.values()))
        return tuple(sorted(((a, (a.pid, a.id) in active) for a in ordered), key=lambda pair: not pair[1]))

    def _views(self, snap: Snapshot) -> list[tuple[TrainingView, int]]:
        """The training processes to judge, each with the number of ranks that share its host."""
        views = snap.training if self.pid is None else job_views(snap.training, self.pid)
        ranks = {rank: len(view.ranks) for view in views for rank in view.ranks}
        return [(view, ranks.get(view.pid, 1)) for view in views]

    def _evaluate(self, rule: Rule, window: JobWindow) -> None:
        pid, now = window.latest.pid, window.latest.time
        state = self._states.setdefault((pid, rule.id), _RuleState())
        finding = rule.check(window, self.config)
        share = state.record(now, finding is not None, rule.hold_s(self.config))
        if state.advice is None:
            if finding is not None and share is not None and share >= th.FIRE_SHARE:
                state.advice = advice_of(rule, finding, pid, now)
        elif share is not None and share <= th.CLEAR_SHARE:
            state.advice = None
        elif finding is not None:
            state.advice = advice_of(rule, finding, pid, state.advice.since)
        if state.advice is not None:
            self._raised[(pid, rule.id)] = state.advice
