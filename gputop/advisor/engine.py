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

import bisect
import dataclasses
import itertools
import operator
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from gputop.advisor import thresholds as th
from gputop.advisor.lineage import Lineage
from gputop.advisor.rules import JOB_RULES, RULES, Finding, JobFinding, JobRule, Rule
from gputop.advisor.rules.base import Check
from gputop.advisor.samples import JobSample, sample_of
from gputop.advisor.window import MAX_HISTORY_SAMPLES, AdvisorConfig, JobWindow
from gputop.jobs import Job, find_jobs
from gputop.model import NO_PROCESS, Advice, Snapshot, TrainingView, job_views

StateKey = tuple[int | str, str]
"""``(PID, rule id)`` for a process's rule, ``(job id, rule id)`` for a job rule, ``("gpu:N", rule id)`` for a
rule on GPU N with no watched process on it."""
IDLE_GPU = "gpu:"


@dataclass(slots=True)
class _RuleState:
    """One rule for one process: recent evaluations ``(time, held)`` and the advice raised, if any.

    ``held_s`` is the time held over the whole intervals between the evaluations kept, each evaluation standing for
    the interval since the one before: kept as evaluations come and go instead of summed anew at every tick, and
    summed anew once the evaluations have all been replaced (``_recount``) so that rounding cannot accumulate.
    """

    evaluations: deque[tuple[float, bool]] = field(default_factory=deque)
    advice: Advice | None = None
    held_s: float = 0.0
    found: tuple[object, ...] | None = None
    """What ``advice`` was made of (the finding, and for a job the ranks it names): the same again keeps it."""
    _recount: int = 0
    _inversions: int = 0
    """Evaluations kept that came with an earlier time than the one before: while there are any, every share is
    summed anew, and ``held_s`` once they are gone."""
    run_from: float = 0.0
    """The time of the first evaluation of the last run of equal ones (all held, or none)."""
    pending: list[float] = field(default_factory=list)
    """The times of unheld evaluations put off (``add_unheld``), in order: made evaluations before the evaluations
    are next read (``_take_pending``)."""
    pending_hold_s: float = 0.0

    def settled(self, now: float, hold_s: float) -> bool:
        """Whether another evaluation the same as the last one changes nothing: every evaluation of the last
        ``hold_s`` is the same, and the advice agrees with it (raised while it holds, none while it does not)."""
        evaluations = self.evaluations
        if not evaluations or self._inversions or self.run_from > now - hold_s:
            return False
        return evaluations[-1][1] == (self.advice is not None)

    def extend(self, times: Sequence[float], hold_s: float) -> None:
        """Evaluations at ``times`` (later than the last one) the same as the last one: what ``record`` would make
        of them one by one, made at once."""
        if self.pending:
            self._take_pending()
        held = self.evaluations[-1][1]
        kept = [at for at, _ in self.evaluations]
        kept += times
        cut = max(0, bisect.bisect_right(kept, kept[-1] - hold_s) - 1, len(kept) - MAX_HISTORY_SAMPLES)
        self.evaluations = deque((at, held) for at in kept[cut:])
        self.held_s = _held_between(self.evaluations) if held else 0.0
        self._recount = len(self.evaluations)

    def add(self, time: float, held: bool, hold_s: float) -> None:
        """Add an evaluation, where its share is not asked for (nothing raised, nothing to raise): what ``record``
        keeps of it. At most ``MAX_HISTORY_SAMPLES`` are kept, the oldest dropped first."""
        if self.pending:
            self._take_pending()
        evaluations = self.evaluations
        if evaluations:
            last_at, last_held = evaluations[-1]
            if last_held != held:
                self.run_from = time
            if time < last_at:
                self._inversions += 1
            elif held:
                self.held_s += time - last_at
        else:
            self.run_from = time
        evaluations.append((time, held))
        start = time - hold_s
        while len(evaluations) > 1 and (evaluations[1][0] <= start or len(evaluations) > MAX_HISTORY_SAMPLES):
            first, (second, holds) = evaluations.popleft()[0], evaluations[0]
            if second < first:
                self._inversions -= 1
            if holds:
                self.held_s -= second - first
        if self._inversions:
            self._recount = 0  # the running total is summed anew once the evaluations are in order again
            return
        self._recount -= 1
        if self._recount <= 0:
            self._recount = len(evaluations)
            self.held_s = _held_between(evaluations)

    def add_unheld(self, time: float, hold_s: float) -> None:
        """``add(time, False, hold_s)``, put off while it can change nothing but which evaluations are kept and when
        the running total is summed anew: every evaluation kept but the first is unheld, in order of time, and so
        is this one (``_take_pending`` then makes them all, as ``add`` makes them one by one). A rule that finds
        nothing, tick after tick, then costs its state a time in a list."""
        pending = self.pending
        if pending:
            if time >= pending[-1] and hold_s == self.pending_hold_s and len(pending) < MAX_PENDING:
                pending.append(time)
                return
        else:
            evaluations = self.evaluations
            if (
                len(evaluations) > 1
                and not self._inversions
                and time >= evaluations[-1][0]
                and not any(held for _, held in itertools.islice(evaluations, 1, None))
            ):
                self.pending_hold_s = hold_s
                pending.append(time)
                return
        self.add(time, False, hold_s)

    def _take_pending(self) -> None:
        """Make the evaluations put off by ``add_unheld``, as ``add`` makes them one by one. None of them holds and
        none of the evaluations kept holds but the first, whose own hold no interval counts: no interval they add or
        drop changes the running total, which changes only where ``add`` would sum it anew (to nothing), each
        ``_recount`` evaluations; the evaluations kept are those from the last at or before the window's start."""
        pending = self.pending
        hold_s = self.pending_hold_s
        self.pending = []
        evaluations = self.evaluations
        times = [at for at, _ in evaluations]
        base = len(times)
        times += pending
        count = len(pending)
        index = max(self._recount - 1, 0)  # the first of them at which the countdown reaches zero
        if index >= count:
            self._recount -= count
        else:
            while True:
                kept = base + index + 1 - _first_kept(times, base + index, hold_s)
                if index + kept >= count:
                    self._recount = kept - (count - 1 - index)
                    break
                index += kept
            self.held_s = 0.0
        cut = _first_kept(times, len(times) - 1, hold_s)
        self.evaluations = deque(
            itertools.chain(
                itertools.islice(evaluations, min(cut, base), None),
                ((at, False) for at in pending[max(0, cut - base) :]),
            )
        )

    def record(self, time: float, held: bool, hold_s: float) -> float | None:
        """Add an evaluation; return the share of the last ``hold_s`` it held, or None before a whole window."""
        self.add(time, held, hold_s)
        evaluations = self.evaluations
        start = time - hold_s
        if self._inversions:
            if evaluations[0][0] > start:
                return None
            return _share_of(evaluations, start, hold_s) if hold_s > 0 else float(held)
        first_at = evaluations[0][0]
        if first_at > start:
            return None
        if hold_s <= 0:
            return float(held)
        held_s = self.held_s
        if evaluations[1][1] if len(evaluations) > 1 else False:
            held_s -= start - first_at  # the first interval counts from the window's start
        share = held_s / hold_s
        if _NEAR_FIRE[0] < share < _NEAR_FIRE[1] or _NEAR_CLEAR[0] < share < _NEAR_CLEAR[1]:
            share = _share_of(evaluations, start, hold_s)  # at a threshold: exactly as a fresh sum gives it
        return share


_NEAR = 1e-9
"""Shares this close to a threshold are summed anew, interval by interval, as they always were: the running total
may differ from that sum in its last bits, and the comparison with the threshold must not."""
_NEAR_FIRE = (th.FIRE_SHARE - _NEAR, th.FIRE_SHARE + _NEAR)
_NEAR_CLEAR = (th.CLEAR_SHARE - _NEAR, th.CLEAR_SHARE + _NEAR)


def _first_kept(times: list[float], last: int, hold_s: float) -> int:
    """Of evaluations at ``times`` (in order) made one by one with ``add``, the index of the first one kept once the
    one at ``last`` is made: the last at or before its window's start, within ``MAX_HISTORY_SAMPLES`` of it."""
    return max(0, bisect.bisect_right(times, times[last] - hold_s, 0, last + 1) - 1, last + 1 - MAX_HISTORY_SAMPLES)


def _held_between(evaluations: deque[tuple[float, bool]]) -> float:
    """The time held over the whole intervals between ``evaluations``."""
    held_s = 0.0
    previous = None
    for at, holds in evaluations:
        if holds and previous is not None:
            held_s += at - previous
        previous = at
    return held_s


def _share_of(evaluations: deque[tuple[float, bool]], start: float, hold_s: float) -> float:
    """The share of the ``hold_s`` from ``start`` that ``evaluations`` held, summed interval by interval."""
    held_s = 0.0
    previous = evaluations[0][0]
    for at, holds in itertools.islice(evaluations, 1, None):
        if holds:
            held_s += at - max(previous, start)
        previous = at
    return held_s / hold_s


class _JudgedTimes:
    """The times of the last ``MAX_HISTORY_SAMPLES`` snapshots judged, in order of time and of arrival: whether a
    new one lies within the gap of any of them is one bisection, even where times go back and forth (a clock
    stepped back, a recording written out of order), which a comparison with the last one alone would not
    thin."""

    __slots__ = ("arrived", "ordered")

    def __init__(self) -> None:
        self.ordered: list[float] = []
        self.arrived: deque[float] = deque()

    def take(self, time: float, gap_s: float) -> bool:
        """Whether ``time`` is at least ``gap_s`` from every time judged; if it is, it is judged now."""
        ordered = self.ordered
        at = bisect.bisect_left(ordered, time)
        if (at < len(ordered) and ordered[at] - time < gap_s) or (at and time - ordered[at - 1] < gap_s):
            return False
        ordered.insert(at, time)
        self.arrived.append(time)
        if len(self.arrived) > MAX_HISTORY_SAMPLES:
            del ordered[bisect.bisect_left(ordered, self.arrived.popleft())]
        return True


class _RuleTable:
    """What the engine reads of its rules at every tick, by rule: its id, check, whether it is a GPU rule or a step
    rule, and how long it holds under ``config``; the ids of the GPU rules; the spans a window is cut at."""

    __slots__ = ("config", "gpu_rules", "hold_of", "rows", "rules", "spans_s")

    def __init__(self, rules: tuple[Rule, ...], config: AdvisorConfig) -> None:
        self.rules = rules
        self.config = config
        self.rows: tuple[tuple[Rule, str, Check, bool, bool, float], ...] = tuple(
            (rule, rule.id, rule.check, rule.gpu, rule.step, rule.hold_s(config)) for rule in rules
        )
        self.hold_of: dict[str, float] = {rule_id: hold_s for _, rule_id, _, _, _, hold_s in self.rows}
        self.gpu_rules: tuple[str, ...] = tuple(rule_id for _, rule_id, _, gpu, _, _ in self.rows if gpu)
        self.spans_s: tuple[float, float, float] = (config.window_s, config.gpu_idle_s, config.history_s)


class ProcessState:
    """What the rules keep of one watched process: its samples over ``history_s``, oldest first, the lineage of the
    windows made of them, and the state of each of its rules, by rule id.

    While every sample of the history is the same but for its time (``same_but_time``), spaced as at the last tick,
    the rules' windows are the last tick's moved in time, and a rule gives what it gave (``key``); once a tick's
    verdicts were those of the tick before with the same key (``quiet_key``), and every rule's evaluations and
    advice agree with its verdict, the rules are not asked again until something they read changes: the times of
    the ticks passed over (``passed``) become evaluations when a rule is next judged."""

    __slots__ = (
        "inversions",
        "key",
        "lineage",
        "passed",
        "quiet_key",
        "run_first",
        "samples",
        "settled",
        "states",
        "times",
        "verdicts",
    )

    def __init__(self) -> None:
        self.samples: deque[JobSample] = deque()
        self.times: deque[float] = deque()
        """The samples' times, in their order: ``steady_key`` reads them all at every tick."""
        self.lineage = Lineage()
        self.states: dict[str, _RuleState] = {}
        self.inversions = 0
        """Samples kept that came with an earlier time than the one before them."""
        self.run_first: JobSample | None = None
        """The first of the last samples that are the same but for their time."""
        self.key: tuple[object, ...] | None = None
        self.verdicts: list[object] = []
        """What each rule gave at the last tick it was judged (``_UNJUDGED`` where it was not)."""
        self.quiet_key: tuple[object, ...] | None = None
        self.passed: list[float] = []
        self.settled = False
        """Every rule's evaluations and advice agree with its verdict (``_RuleState.settled``) since a tick passed
        over: they go on agreeing while the ticks are passed over."""

    def add(self, sample: JobSample, oldest: float) -> None:
        """Add a snapshot's sample and forget those older than ``oldest``, and the oldest beyond
        ``MAX_HISTORY_SAMPLES`` (times that go back and forth keep samples of any age)."""
        samples = self.samples
        if samples and sample.time < samples[-1].time:
            self.inversions += 1
        if not samples or not same_but_time(samples[-1], sample):
            self.run_first = sample
        samples.append(sample)
        times = self.times
        times.append(sample.time)
        while samples[0].time < oldest or len(samples) > MAX_HISTORY_SAMPLES:
            gone = samples.popleft()
            times.popleft()
            if samples[0].time < gone.time:
                self.inversions -= 1
        self.lineage.ordered = not self.inversions

    def window(self) -> JobWindow:
        """This tick's window of the samples."""
        self.lineage.next_tick()
        return JobWindow(tuple(self.samples), self.lineage)

    def steady_key(self, spans_s: tuple[float, ...]) -> tuple[object, ...] | None:
        """The same for two ticks whose windows are the same but moved in time; None while the history's samples
        differ (or go back in time, or a job's start-up is still in it: ``age_s`` is read as past it or not)."""
        samples = self.samples
        first = self.run_first
        if self.inversions or first is None or first.time > samples[0].time:
            return None
        age_s = samples[0].age_s
        if age_s is not None and age_s < th.HOST_WARMUP_S:
            return None
        offsets = tuple(map(operator.sub, self.times, itertools.repeat(samples[-1].time)))
        for span_s in spans_s:
            # A sample a rounding error from a window's start may fall in it at one tick and out at the next.
            near = bisect.bisect_left(offsets, -span_s - _ROUNDING_S)
            if near < len(offsets) and offsets[near] < -span_s + _ROUNDING_S and offsets[near] != -span_s:
                return None
        return (first, offsets)

    def catch_up(self, hold_s: dict[str, float]) -> None:
        """Make evaluations of the ticks passed over, each the same as the rule's last one."""
        if self.passed:
            for rule_id, state in self.states.items():
                state.extend(self.passed, hold_s[rule_id])
            self.passed = []


_CONTENT = ("view", "host", "gpus", "gpu_rows", "worker_gpu_rows", "rss_bytes", "local_ranks", "loader", "process")
"""What a sample holds but its time and age (``age_s``, its time less the process's start)."""
_UNJUDGED = object()
_ROUNDING_S = 1e-6
MAX_PASSED = 256
"""Ticks passed over that are made evaluations at once: the history of a process quiet for days stays bounded."""
MAX_PENDING = 128
"""Unheld evaluations a rule's state puts off (``_RuleState.add_unheld``) before it makes them at once: enough that
making them costs little per evaluation, few enough that a state holds at most a kilobyte of them."""


_CONTENT_OF = operator.attrgetter(*_CONTENT)


def same_but_time(a: JobSample, b: JobSample) -> bool:
    """Whether two samples of a process hold the same but for their time: each of their ``_CONTENT`` the same
    object or equal, as tuples compare them."""
    return bool(_CONTENT_OF(a) == _CONTENT_OF(b))


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
        self._processes: dict[int, ProcessState] = {}
        self._last_merge: tuple[list[Advice], object] = ([], None)
        """The findings ``active`` was merged from, with the jobs and GPUs it was merged by."""
        self._states: dict[StateKey, _RuleState] = {}
        self._raised: dict[StateKey, Advice] = {}
        self._jobs: dict[str, Job] = {}
        """The jobs of several ranks seen, by id: the last members of each, to merge their findings by."""
        self._gpus: dict[int, tuple[int, ...]] = {}
        """The GPUs each process was last seen on, to give a GPU's finding once."""
        self._judged = _JudgedTimes()
        self._rule_table: _RuleTable | None = None
        self._idle_subjects: set[int | str] = set()
        """The GPUs no watched process is on that have rule states (``IDLE_GPU`` and the index), kept as their
        states come and go instead of found among every state at every tick."""

    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        """Take one snapshot into account; returns the findings active after it, most urgent first.

        A snapshot closer than ``min_gap_s`` to one judged before is left out (the findings stand as they were):
        rows closer together than any sampler takes them would otherwise make every tick read a history of
        every one of them."""
        config = self.config
        now = snap.time
        if not self._judged.take(now, config.min_gap_s):
            return self.active
        oldest = now - config.history_s
        table = self._table()
        rules, hold_of, gpu_rules, spans_s = table.rows, table.hold_of, table.gpu_rules, table.spans_s
        watched = self._views(snap)
        windows: dict[int, JobWindow] = {}
        for view, local_ranks in watched:
            pid = view.pid
            process = self._processes.get(pid)
            if process is None:
                process = self._processes[pid] = ProcessState()
            process.add(sample_of(snap, view, local_ranks), oldest)
            window = windows[pid] = process.window()
            latest = window.latest
            self._gpus[pid] = tuple(g.index for g in latest.gpus)
            at = latest.time
            states = process.states
            key = process.steady_key(spans_s)
            if (
                key is not None
                and key == process.quiet_key
                and (process.settled or all(state.settled(at, hold_of[rule_id]) for rule_id, state in states.items()))
            ):
                process.settled = True
                process.passed.append(at)
                if len(process.passed) >= MAX_PASSED:
                    process.catch_up(hold_of)
                continue
            process.catch_up(hold_of)
            process.settled = False
            trains = view.trains
            timed = latest.step is not None
            verdicts: list[object] = []
            for rule, rule_id, check, gpu, step, hold_s in rules:
                finding: object = _UNJUDGED
                if gpu or trains:
                    state = states.get(rule_id)
                    if state is None:
                        if step and not timed:
                            verdicts.append(finding)
                            continue  # nothing to judge before the probe reports a step
                        state = states[rule_id] = self._states[(pid, rule_id)] = _RuleState()
                    finding = check(window, config)
                    if finding is None and state.advice is None:
                        state.add_unheld(at, hold_s)  # nothing raised, nothing to raise
                    else:
                        self._hold(state, (pid, rule_id), at, hold_s, finding, rule, pid)
                verdicts.append(finding)
            same = (
                key is not None
                and key == process.key
                and len(verdicts) == len(process.verdicts)
                and all(map(operator.is_, verdicts, process.verdicts))
            )
            process.quiet_key = key if same else None
            process.key, process.verdicts = key, verdicts
        alive = windows.keys()
        if self.pid is None:
            self._judge_idle_gpus(snap, {index for pid in alive for index in self._gpus[pid]})
        jobs = [j for j in find_jobs(snap, singles=False) if len(j.ranks) > 1 and set(j.pids) <= alive]
        for job in jobs:
            self._jobs[job.id] = job
            for job_rule in self.job_rules:
                self._evaluate_job(job_rule, job, windows, now)
        current = {j.id for j in jobs}
        ended = [job_id for job_id in self._jobs if job_id not in current]
        for pid in [pid for pid in self._processes if pid not in alive]:  # it ended: its findings end with it
            del self._processes[pid]
            self._gpus.pop(pid, None)
            self._forget(pid)
        for job_id in ended:
            self._forget(job_id)
            if self.pid is None:
                del self._jobs[job_id]
        advice = [s.advice for s in self._states.values() if s.advice is not None]
        merging = ({job.id: job.pids for job in self._jobs.values()}, dict(self._gpus), gpu_rules)
        last_advice, last_merging = self._last_merge
        if (
            len(advice) != len(last_advice)
            or any(a is not b for a, b in zip(advice, last_advice))
            or (merging != last_merging)
        ):
            self.active = by_urgency(self._merged(advice))
            self._last_merge = (advice, merging)
        return self.active

    def _table(self) -> _RuleTable:
        """What every tick reads of the rules and the settings, worked out again only once either is replaced."""
        table = self._rule_table
        if table is None or table.rules is not self.rules or table.config is not self.config:
            table = self._rule_table = _RuleTable(self.rules, self.config)
        return table

    def _judge_idle_gpus(self, snap: Snapshot, held: set[int]) -> None:
        """The ``idle_gpu`` checks on each GPU no watched process is on; a GPU's state is dropped (its finding
        with it) once a process is on it, whose own rules then judge it, or once it is gone."""
        idle = {g.index: g for g in snap.gpus if g.index not in held}
        for subject in self._idle_subjects - {f"{IDLE_GPU}{index}" for index in idle}:
            self._forget(subject)
        for rule in self.rules:
            if rule.idle_gpu is None:
                continue
            for index, gpu in idle.items():
                key = (f"{IDLE_GPU}{index}", rule.id)
                state = self._states.get(key)
                finding = rule.idle_gpu(gpu)
                if state is None:
                    if finding is None:
                        continue  # nothing to judge on a healthy idle GPU: no state kept for it
                    state = self._states[key] = _RuleState()
                    self._idle_subjects.add(key[0])
                self._hold(state, key, snap.time, rule.hold_s(self.config), finding, rule, NO_PROCESS)

    def _forget(self, key: int | str) -> None:
        """Drop the rule states of a process or job that ended, and, watching a whole machine for days, its
        findings too: only a watched job's report keeps them."""
        for state_key in [k for k in self._states if k[0] == key]:
            del self._states[state_key]
        self._idle_subjects.discard(key)
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
        key = (job.id, rule.id)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _RuleState()
        found: JobFinding | None = rule.check(job, windows, self.config)
        pid, pids = (found.pid, found.pids) if found is not None else (job.pids[0], job.pids)
        finding = None if found is None else found.finding
        self._hold(state, key, now, rule.hold_s(self.config), finding, rule, pid, job.id, pids)

    def _hold(
        self,
        state: _RuleState,
        key: StateKey,
        now: float,
        hold_s: float,
        finding: Finding | None,
        rule: Rule | JobRule,
        pid: int,
        job: str | None = None,
        pids: tuple[int, ...] = (),
    ) -> None:
        """The hysteresis of one rule for one process or job: raise its finding once the condition held for
        ``FIRE_SHARE`` of ``hold_s``, keep it up to date while it holds, clear it once it held for ``CLEAR_SHARE``
        or less. The finding's ``Advice`` keeps the time it was first raised; a finding the same as the one
        before keeps its ``Advice``."""
        share = state.record(now, finding is not None, hold_s)
        advice = state.advice
        if advice is None:
            if finding is not None and share is not None and share >= th.FIRE_SHARE:
                state.advice = advice_of(rule, finding, pid, now, job, pids)
                state.found = (finding, pid, pids)
        elif share is not None and share <= th.CLEAR_SHARE:
            state.advice = state.found = None
        elif finding is not None:
            found = (finding, pid, pids)
            if found != state.found:
                state.advice = advice_of(rule, finding, pid, advice.since, job, pids)
                state.found = found
        if state.advice is not None and state.advice is not advice:
            self._raised[key] = state.advice
