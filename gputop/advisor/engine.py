"""The advisor: feeds each training process's samples to the rules and raises and clears their findings.

A finding is raised once its rule's condition has held for ``FIRE_SHARE`` of a window (``window_s``, or
``gpu_idle_s`` for ``gpu-idle``), and cleared once it has held for ``CLEAR_SHARE`` of a window or less. Shares are
weighted by time, each evaluation standing for the interval since the one before, so irregular ticks (a replay,
a slow sampler) count for what they cover. All times come from the snapshots, so replaying a recording gives the
findings the live run gave.

Training rules judge only processes with training evidence; a plain holder of GPU memory gets the GPU rules
alone (``Rule.gpu``), and a GPU's finding is given once for the GPU, listing its processes. The job rules
(``JOB_RULES``) judge each job of several ranks as a whole; a process's finding that holds on every rank of its
job is given once for the job, listing the ranks.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputop.advisor import thresholds as th
from gputop.advisor.rules import JOB_RULES, RULES, Finding, JobFinding, JobRule, Rule
from gputop.advisor.window import AdvisorConfig, JobSample, JobWindow, sample_of
from gputop.jobs import Job, find_jobs
from gputop.model import Advice, Snapshot, TrainingView, job_views

StateKey = tuple[int | str, str]
"""``(PID, rule id)`` for a process's rule, ``(job id, rule id)`` for a job rule."""


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


def advice_of(
    rule: Rule | JobRule, finding: Finding, pid: int, since: float, job: str | None = None, pids: tuple[int, ...] = ()
) -> Advice:
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
        job=job,
        pids=(pid, *(p for p in pids if p != pid)) if len(pids) > 1 else (),
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
        self.job_rules: tuple[JobRule, ...] = JOB_RULES
        self.active: tuple[Advice, ...] = ()
        self._samples: dict[int, deque[JobSample]] = {}
        self._states: dict[StateKey, _RuleState] = {}
        self._raised: dict[StateKey, Advice] = {}
        self._jobs: dict[str, Job] = {}
        """The jobs of several ranks seen, by id: the last members of each, to merge their findings by."""
        self._gpus: dict[int, tuple[int, ...]] = {}
        """The GPUs each process was last seen on, to give a GPU's finding once."""

    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        """Take one snapshot into account; returns the findings active after it, most urgent first."""
        watched = self._views(snap)
        for view, local_ranks in watched:
            samples = self._samples.setdefault(view.pid, deque())
            samples.append(sample_of(snap, view, local_ranks))
            while samples[0].time < snap.time - self.config.history_s:
                samples.popleft()
            window = JobWindow(tuple(samples))
            self._gpus[view.pid] = tuple(g.index for g in window.latest.gpus)
            for rule in self.rules:
                if rule.gpu or view.trains:
                    self._evaluate(rule, window)
        alive = {view.pid for view, _ in watched}
        jobs = [j for j in find_jobs(snap) if len(j.ranks) > 1 and set(j.pids) <= alive]
        for job in jobs:
            self._jobs[job.id] = job
            windows = {pid: JobWindow(tuple(self._samples[pid])) for pid in job.pids}
            for job_rule in self.job_rules:
                self._evaluate_job(job_rule, job, windows, snap.time)
        current = {j.id for j in jobs}
        ended = [job_id for job_id in self._jobs if job_id not in current]
        for pid in set(self._samples) - alive:  # the process ended: its findings end with it
            del self._samples[pid]
            self._gpus.pop(pid, None)
            self._forget(pid)
        for job_id in ended:
            self._forget(job_id)
            if self.pid is None:
                del self._jobs[job_id]
        self.active = by_urgency(self._merged([s.advice for s in self._states.values() if s.advice is not None]))
        return self.active

    def _forget(self, key: int | str) -> None:
        """Drop the rule states of a process or job that ended, and, watching a whole machine for days, its
        findings too: only a watched job's report keeps them."""
        for state_key in [k for k in self._states if k[0] == key]:
            del self._states[state_key]
        if self.pid is None:
            for state_key in [k for k in self._raised if k[0] == key]:
                del self._raised[state_key]

    def raised(self) -> tuple[tuple[Advice, bool], ...]:
        """Every finding raised so far, in its latest form, with whether it is still active; active first.

        Watching every process (no ``pid``), the findings of processes that ended are forgotten.
        """
        active = {(a.pid, a.id) for a in self.active}
        ordered = by_urgency(self._merged(list(self._raised.values())))
        return tuple(sorted(((a, (a.pid, a.id) in active) for a in ordered), key=lambda pair: not pair[1]))

    def _merged(self, advice: list[Advice]) -> list[Advice]:
        """A process's finding that holds on every rank of its job as one finding of the job, and a GPU rule's
        findings on one GPU as one finding of the GPU; the rest as they are."""
        gpu_rules = {rule.id for rule in self.rules if rule.gpu}
        groups: dict[tuple[object, ...], list[Advice]] = {}
        job_of = {pid: job for job in self._jobs.values() for pid in job.pids}
        for a in advice:
            if a.job is not None:
                key: tuple[object, ...] = ("as is", a.pid, a.id, a.job)
            elif a.id in gpu_rules and self._gpus.get(a.pid):
                key = ("gpu", a.id, self._gpus[a.pid])
            elif a.pid in job_of:
                key = ("job", a.id, job_of[a.pid].id)
            else:
                key = ("as is", a.pid, a.id)
            groups.setdefault(key, []).append(a)
        out = []
        for key, found in groups.items():
            found.sort(key=lambda a: a.pid)
            if key[0] == "gpu" and len(found) > 1:
                out.append(dataclasses.replace(found[0], pids=tuple(a.pid for a in found)))
            elif key[0] == "job" and len(found) > 1 and {a.pid for a in found} == set(job_of[found[0].pid].pids):
                job = job_of[found[0].pid]
                first = min(found, key=lambda a: job.pids.index(a.pid))
                out.append(dataclasses.replace(first, job=job.id, pids=job.pids, since=min(a.since for a in found)))
            else:
                out.extend(found)
        return out

    def _views(self, snap: Snapshot) -> list[tuple[TrainingView, int]]:
        """The training processes to judge, each with the number of ranks that share its host."""
        views = snap.training if self.pid is None else job_views(snap.training, self.pid)
        ranks = {rank: len(view.ranks) for view in views for rank in view.ranks}
        return [(view, ranks.get(view.pid, 1)) for view in views]

    def _evaluate_job(self, rule: JobRule, job: Job, windows: dict[int, JobWindow], now: float) -> None:
        found: JobFinding | None = rule.check(job, windows, self.config)
        pid, pids = (found.pid, found.pids) if found is not None else (job.pids[0], job.pids)
        self._hold(
            (job.id, rule.id),
            now,
            rule.hold_s(self.config),
            None if found is None else found.finding,
            lambda finding, since: advice_of(rule, finding, pid, since, job.id, pids),
        )

    def _evaluate(self, rule: Rule, window: JobWindow) -> None:
        pid = window.latest.pid
        finding = rule.check(window, self.config)
        self._hold(
            (pid, rule.id),
            window.latest.time,
            rule.hold_s(self.config),
            finding,
            lambda found, since: advice_of(rule, found, pid, since),
        )

    def _hold(
        self,
        key: StateKey,
        now: float,
        hold_s: float,
        finding: Finding | None,
        advice: Callable[[Finding, float], Advice],
    ) -> None:
        """The hysteresis of one rule for one process or job: raise its finding once the condition held for
        ``FIRE_SHARE`` of ``hold_s``, keep it up to date while it holds, clear it once it held for ``CLEAR_SHARE``
        or less; ``advice`` makes the finding's ``Advice`` with the time it was first raised."""
        state = self._states.setdefault(key, _RuleState())
        share = state.record(now, finding is not None, hold_s)
        if state.advice is None:
            if finding is not None and share is not None and share >= th.FIRE_SHARE:
                state.advice = advice(finding, now)
        elif share is not None and share <= th.CLEAR_SHARE:
            state.advice = None
        elif finding is not None:
            state.advice = advice(finding, state.advice.since)
        if state.advice is not None:
            self._raised[key] = state.advice
