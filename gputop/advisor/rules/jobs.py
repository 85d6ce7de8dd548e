"""Rules on a whole job of several ranks: the rank that holds the others back, ranks that wait for data unevenly,
and a node whose ranks together start more DataLoader workers than it has cores.

Each takes the job (``gputop.jobs``) and the window of each of its ranks, and names the rank (or node) it is
about. In synchronous data-parallel training every rank takes the same time per step: the ranks that finish
their own work first wait for the last one inside the gradients' all-reduce. The probe's step anatomy shows that
wait as each rank's ``collective`` phase, and the rank the others wait for as the one whose own phases take longer
while it waits least, whatever makes it slower (its CPU, its I/O, a sleep, its GPU). Without the anatomy the
wait shows from outside as the main thread off the CPU while the loop is not waiting for data, and what a rank
computes per step as its main thread's time on the CPU: that finds only a rank slowed on the CPU.

A rank that is late only because it waited longer than the others for a CPU of a host they share, all of whose
cores are taken, is no straggler: the scheduler hands that wait to whichever rank it likes, and nothing of the
rank's own would change it. On a host of its own, or where cores are free, that wait is what slows it, and the
finding says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

from gputop.advisor import thresholds as th
from gputop.advisor.loop import worker_activity
from gputop.advisor.readers import (
    DATA_WAIT_SHARE,
    HAS_STEP,
    HOST_CPU,
    MAIN_THREAD_BUSY,
    MAIN_THREAD_CPU,
    PHASE_S,
    STEP_MEAN_S,
    STEPS_PER_S,
)
from gputop.advisor.rules.base import Finding, count, pct, recent_window
from gputop.advisor.window import MIN_SAMPLES, AdvisorConfig, JobWindow
from gputop.frozen import immutable
from gputop.jobs import Job, JobRank
from gputop.model import INFO, PHASES, SOURCE_BOTH, SOURCE_EXTERNAL, SOURCE_PROBE, WARNING, AdviceSource, Phase


@immutable
class JobFinding:
    """A job rule's finding: ``pid`` is the rank it names (the straggler) or the job's first rank; ``pids`` the
    ranks it concerns."""

    finding: Finding
    pid: int
    pids: tuple[int, ...]


JobCheck = Callable[[Job, Mapping[int, JobWindow], AdvisorConfig], "JobFinding | None"]


@immutable
class JobRule:
    """A job rule's stable id and its check; it holds for ``windows`` windows (one, like a process's rule)."""

    id: str
    check: JobCheck
    windows: float = 1.0

    def hold_s(self, config: AdvisorConfig) -> float:
        return config.window_s * self.windows


@immutable
class RankStats:
    """One rank over the last window: medians of what the rules compare."""

    rank: JobRank
    window: JobWindow
    steps_per_s: float | None
    data_wait: float | None
    main_busy: float | None
    cpu_wait_s: float = 0.0

    @property
    def others_wait(self) -> float | None:
        """The share of a step the main thread sleeps outside the data wait: waiting for other ranks."""
        if self.main_busy is None:
            return None
        return max(0.0, 1.0 - self.main_busy - (self.data_wait or 0.0))

    @property
    def own_s(self) -> float | None:
        """Seconds per step the rank computes on its own: its main thread's time on a CPU, or waiting for one, per
        step. Waiting for its data is not counted here: a rank held up by its input is ``rank-imbalance``'s."""
        if not self.steps_per_s or self.main_busy is None:
            return None
        return self.main_busy / self.steps_per_s


def rank_stats(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> list[RankStats]:
    """Each rank with a whole recent window, in the job's order."""
    found = []
    for rank in job.ranks:
        window = windows.get(rank.pid)
        recent = recent_window(window, config) if window is not None else None
        if recent is None:
            continue
        steps_per_s = recent.median(STEPS_PER_S)
        cpu_wait = cpu_wait_s(recent, 1 / steps_per_s) if steps_per_s else 0.0
        found.append(
            RankStats(
                rank, recent, steps_per_s, recent.median(DATA_WAIT_SHARE), recent.median(MAIN_THREAD_BUSY), cpu_wait
            )
        )
    return found


def cpu_wait_s(window: JobWindow, step_s: float) -> float:
    """Seconds per step the rank's main thread waited in a run queue for a CPU: its busy share (on a CPU or
    runnable) less its share on a CPU, over the window; 0 where the kernel does not tell them apart."""
    busy = window.median(MAIN_THREAD_BUSY)
    cpu = window.median(MAIN_THREAD_CPU)
    if busy is None or cpu is None:
        return 0.0
    return max(0.0, busy - cpu / 100) * step_s


def scheduler_chose(ranks: Sequence[JobRank], window: JobWindow) -> bool:
    """Whether which rank waits for a CPU is the scheduler's choice: the ranks share one host, and all its cores
    are taken (``window`` is one rank's, the host's the same in all). Where cores are free, a rank that waits for
    one is held to busy cores by its affinity, or by whatever it shares them with."""
    if len({r.host for r in ranks}) != 1:
        return False
    busy = window.median(HOST_CPU)
    return busy is not None and busy >= th.HOST_CPU_SATURATED_PERCENT


def _queued(slowest: Rank, others: Sequence[Rank]) -> tuple[float, bool]:
    """How much longer than the others' median the slowest rank waited for a CPU per step, and whether that wait
    is the scheduler's choice among ranks on one saturated host (``scheduler_chose``) rather than the rank's."""
    queued = max(0.0, slowest.cpu_wait_s - statistics.median(r.cpu_wait_s for r in others))
    return queued, scheduler_chose([slowest.rank, *(r.rank for r in others)], slowest.window)


OWN_PHASES: tuple[Phase, ...] = tuple(p for p in PHASES if p not in ("data", "collective"))
"""The phases in which a rank does its own work: not waiting for its data (``rank-imbalance``'s) nor for the other
ranks."""
PHASE_WORDS: dict[Phase, str] = {
    "h2d": "its host-to-device copies",
    "forward": "its forward pass",
    "backward": "its backward pass",
    "optimizer": "its optimizer step",
    "other": "its own code between the phases (other)",
}


@immutable
class RankSteps:
    """One rank's step over the samples of the last window that carry the probe's anatomy: the median seconds per
    phase (phases it did not report are left out) and of the whole step."""

    rank: JobRank
    window: JobWindow
    step_s: float
    phases: dict[Phase, float]
    cpu_wait_s: float = 0.0

    @property
    def own_s(self) -> float:
        """Seconds per step of its own work: every phase but waiting for data and for the other ranks."""
        return sum(self.phases.get(p, 0.0) for p in OWN_PHASES)

    @property
    def wait_share(self) -> float:
        """The share of its step it waits for the other ranks in collectives."""
        return self.phases.get("collective", 0.0) / self.step_s


Rank = RankStats | RankSteps
"""A rank as either straggler check measures it: by its main thread's CPU, or by its step's phases."""


def step_window(w: JobWindow, config: AdvisorConfig) -> JobWindow | None:
    """The samples of the last window that carry the probe's step anatomy, or None for fewer than ``MIN_SAMPLES``.
    Each is already the probe's statistic over its own window of steps: a whole window of them is not waited
    for."""
    found = w.last(config.window_s).where(HAS_STEP)
    return found if len(found.samples) >= MIN_SAMPLES else None


def rank_steps(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> list[RankSteps] | None:
    """Each rank's step, in the job's order; None unless every rank with a window reports its step with the waits
    in collectives, and some rank waits in them at all (a probe that cannot see them reports none)."""
    found = []
    for rank in job.ranks:
        window = windows.get(rank.pid)
        if window is None:
            continue
        steps = step_window(window, config)
        if steps is None:
            return None
        step_s = steps.median(STEP_MEAN_S)
        phases = {p: v for p in PHASES if (v := steps.median(PHASE_S(p))) is not None}
        if not step_s or "collective" not in phases:
            return None
        found.append(RankSteps(rank, steps, step_s, phases, cpu_wait_s(steps, step_s)))
    if len(found) < 2 or not any(r.phases["collective"] > 0 for r in found):
        return None
    return found


def rank_name(rank: JobRank) -> str:
    """``rank 3 (PID 4104 on gpu-node-2)``."""
    where = f"PID {rank.pid}" + (f" on {rank.host}" if rank.host else "")
    return f"rank {'?' if rank.rank is None else rank.rank} ({where})"


def straggler(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> JobFinding | None:
    """The rank the others wait for: from the probe's step anatomy where every rank reports it, else from the main
    threads' time on the CPU."""
    steps = rank_steps(job, windows, config)
    if steps is not None:
        return _step_straggler(job, steps)
    return _cpu_straggler(job, windows, config)


def _named(rank: JobRank, window: JobWindow) -> str:
    """``rank 1 (PID 4104 on gpu-node-2, GPU 1)``."""
    name = rank_name(rank)
    gpus = window.latest.gpus
    return name[:-1] + f", GPU {', '.join(str(g.index) for g in gpus)})" if gpus else name


def _step_straggler(job: Job, ranks: Sequence[RankSteps]) -> JobFinding | None:
    """One rank's own phases take well longer than the others' median while the others wait for it in
    collectives and it waits little: the others' wait is its extra work."""
    slowest = max(ranks, key=lambda r: r.own_s)
    others = [r for r in ranks if r is not slowest]
    own = statistics.median(r.own_s for r in others)
    excess = slowest.own_s - own
    step_s = statistics.median(r.step_s for r in ranks)
    waiting = statistics.median(r.wait_share for r in others)
    queued, shared = _queued(slowest, others)
    if shared:
        excess -= queued  # the host's CPUs, shared by every rank, not the rank's own work
    if own <= 0 or excess < own * th.STRAGGLER_SLOWER or excess < th.STRAGGLER_OTHERS_WAIT * step_s:
        return None
    if waiting < th.STRAGGLER_OTHERS_WAIT or waiting - slowest.wait_share < th.STRAGGLER_OTHERS_WAIT:
        return None
    medians = {p: statistics.median(r.phases.get(p, 0.0) for r in others) for p in OWN_PHASES}
    phase = max(OWN_PHASES, key=lambda p: slowest.phases.get(p, 0.0) - medians[p])
    theirs = medians[phase]
    mine = slowest.phases.get(phase, 0.0)
    name = _named(slowest.rank, slowest.window)
    differences = _what_differs(slowest, others, queued, excess)
    return _straggler(
        job,
        slowest.rank,
        slowest.window,
        len(others),
        detail=f"{name} spends {mine * 1000:.0f} ms of each step in {phase}, the others' median "
        f"{theirs * 1000:.0f} ms; its own work takes {slowest.own_s * 1000:.0f} ms a step against the others' "
        f"{own * 1000:.0f} ms, and the others wait for it in collectives {pct(waiting)} of each step (it waits "
        f"{pct(slowest.wait_share)})",
        look=f"Look at {PHASE_WORDS[phase]} on {name}: whatever makes it {(mine - theirs) * 1000:.0f} ms longer "
        "there, on the CPU, in I/O, asleep or on its GPU" + (": " + "; ".join(differences) if differences else ""),
        source=SOURCE_PROBE if not differences else SOURCE_BOTH,
        evidence={
            "gpus": tuple(g.index for g in slowest.window.latest.gpus),
            "measured_by": "step",
            "phase": phase,
            "phase_s": round(mine, 4),
            "others_phase_s": round(theirs, 4),
            "own_step_s": round(slowest.own_s, 4),
            "others_own_step_s": round(own, 4),
            "others_wait_share": round(waiting, 3),
            "own_wait_share": round(slowest.wait_share, 3),
            "step_s": round(step_s, 4),
            "ranks": len(ranks),
        },
    )


def _cpu_straggler(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> JobFinding | None:
    """One rank's own work per step is well above the others' median while they wait for it."""
    stats = [s for s in rank_stats(job, windows, config) if s.own_s is not None]
    if len(stats) < 2:
        return None
    slowest = max(stats, key=lambda s: s.own_s or 0.0)
    others = [s for s in stats if s is not slowest]
    own = statistics.median(s.own_s or 0.0 for s in others)
    waiting = statistics.median(s.others_wait or 0.0 for s in others)
    excess = (slowest.own_s or 0.0) - own
    step_s = 1 / slowest.steps_per_s if slowest.steps_per_s else 0.0
    queued, shared = _queued(slowest, others)
    if shared:
        excess -= queued  # the host's CPUs, shared by every rank, not the rank's own work
    if not own or excess < own * th.STRAGGLER_SLOWER or waiting < th.STRAGGLER_OTHERS_WAIT:
        return None
    if excess < th.STRAGGLER_OTHERS_WAIT * step_s:
        return None  # more compute, but too little of a step to be what the others wait for
    slower = (slowest.own_s or 0.0) / own - 1
    name = _named(slowest.rank, slowest.window)
    differences = _what_differs(slowest, others, queued, excess)
    return _straggler(
        job,
        slowest.rank,
        slowest.window,
        len(others),
        detail=f"{name} computes {(slowest.own_s or 0) * 1000:.0f} ms of each step, {pct(slower)} more than the "
        f"others' median of {own * 1000:.0f} ms; the others wait for it {pct(waiting)} of each step",
        look=f"Look at {name}: "
        + ("; ".join(differences) if differences else "it differs from the others in nothing gputop sees"),
        source=SOURCE_BOTH,
        evidence={
            "own_step_s": round(slowest.own_s or 0.0, 4),
            "others_own_step_s": round(own, 4),
            "others_wait_share": round(waiting, 3),
            "ranks": len(stats),
        },
    )


def _straggler(
    job: Job,
    rank: JobRank,
    window: JobWindow,
    others: int,
    detail: str,
    look: str,
    source: AdviceSource,
    evidence: dict[str, object],
) -> JobFinding:
    """The straggler finding, however it was measured: ``look`` says where to look, ``evidence`` follows the rank's
    own (rank, PID, host)."""
    return JobFinding(
        Finding(
            severity=WARNING,
            title=f"Straggler: {rank_name(rank).split(' (')[0]} holds the other {others} back",
            detail=detail,
            action=look + ". The whole job runs at its pace: every step ends with the other ranks waiting for it in "
            "the gradients' all-reduce.",
            source=source,
            evidence={
                "rank": rank.rank,
                "pid": rank.pid,
                **({"host": rank.host} if rank.host else {}),
                **evidence,
            },
        ),
        rank.pid,
        job.pids,
    )


def _what_differs(slowest: Rank, others: Sequence[Rank], queued: float, excess: float) -> list[str]:
    """What sets the straggler apart (``_differences``), and its wait for a CPU, in words, where that makes up a
    quarter of its extra time or more."""
    found = _differences(slowest.window, [r.window for r in others])
    if queued < excess / 4 or queued <= 0:
        return found
    rank, mine = slowest.rank, slowest.cpu_wait_s
    theirs = [r.cpu_wait_s for r in others]
    on = f" (on {rank.host})" if rank.host else ""
    return [
        *found,
        f"it waits for a CPU {mine * 1000:.0f} ms of each step{on}, the others {statistics.median(theirs) * 1000:.0f} "
        "ms: its host's cores are all taken",
    ]


def _differences(mine: JobWindow, theirs: Sequence[JobWindow]) -> list[str]:
    """What sets the straggler apart from the others, in words: data wait, CPU, its GPU, its batch."""
    found = []
    wait = mine.median(DATA_WAIT_SHARE)
    waits = [v for w in theirs if (v := w.median(DATA_WAIT_SHARE)) is not None]
    if wait is not None and waits and wait - statistics.median(waits) >= th.DATA_WAIT_INFO:
        found.append(f"it waits for data {pct(wait)} of its step, the others {pct(statistics.median(waits))}")
    main = mine.median(MAIN_THREAD_BUSY)
    busy = [v for w in theirs if (v := w.median(MAIN_THREAD_BUSY)) is not None]
    if main is not None and busy:
        others_busy = pct(statistics.median(busy))
        found.append(f"its main thread is on the CPU {pct(main)} of the time, the others' {others_busy}")
    latest = mine.latest
    for gpu in latest.gpus:
        reasons = [r for r in gpu.throttle_reasons or () if r != "gpu_idle"]
        if reasons:
            found.append(f"GPU {gpu.index} is throttled ({', '.join(reasons)})")
    names = {g.name for w in theirs for g in w.latest.gpus}
    own_names = {g.name for g in latest.gpus}
    if names and own_names and not own_names <= names:
        mine_names, their_names = (", ".join(sorted(n or "?" for n in group)) for group in (own_names, names))
        found.append(f"its GPU is a {mine_names}, the others' {their_names}")
    batches = {b for w in theirs if (b := w.latest.batch_size) is not None}
    if latest.batch_size is not None and batches and latest.batch_size not in batches:
        found.append(f"its batch_size is {latest.batch_size}, the others' {', '.join(map(str, sorted(batches)))}")
    return found


def rank_imbalance(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> JobFinding | None:
    """The ranks wait for data unevenly: one shard, disk or node feeds its rank more slowly than the rest."""
    stats = [s for s in rank_stats(job, windows, config) if s.data_wait is not None]
    if len(stats) < 2:
        return None
    waits = [s.data_wait or 0.0 for s in stats]
    most = max(stats, key=lambda s: s.data_wait or 0.0)
    base = statistics.median(s.data_wait or 0.0 for s in stats if s is not most)
    middle = statistics.median(waits)
    spread = max(waits) - min(waits)
    if spread < th.IMBALANCE_SPREAD or max(waits) < th.IMBALANCE_RATIO * max(base, th.DATA_WAIT_NONE):
        return None
    slow = [s for s in stats if (s.data_wait or 0.0) - base >= th.IMBALANCE_SPREAD]
    named = ", ".join(f"{rank_name(s.rank)} {pct(s.data_wait)}" for s in slow)
    return JobFinding(
        Finding(
            severity=WARNING if max(waits) >= th.DATA_WAIT_WARNING else INFO,
            title=f"Ranks wait for data unevenly: {pct(min(waits))} to {pct(max(waits))} of each step",
            detail=f"data wait per step: {named}; the job's median is {pct(middle)}",
            action=(
                "Every rank waits for the slowest to feed its batch. Check what differs for "
                + ("that rank" if len(slow) == 1 else "those ranks")
                + ": an uneven shard (DistributedSampler with drop_last, sample sizes that vary), a slower disk or "
                "network mount on its node, fewer CPU cores or workers there. Give its DataLoader more workers, "
                "or move its data to local storage."
            ),
            source=SOURCE_BOTH,
            evidence={
                "data_wait_min": round(min(waits), 3),
                "data_wait_max": round(max(waits), 3),
                "data_wait_median": round(middle, 3),
                "slow_ranks": tuple(s.rank.rank for s in slow),
            },
        ),
        slow[0].rank.pid,
        tuple(s.rank.pid for s in slow),
    )


def node_cpu_oversubscribed(job: Job, windows: Mapping[int, JobWindow], config: AdvisorConfig) -> JobFinding | None:
    """The ranks of one node and their DataLoader workers are more processes than the node has cores, and the
    workers want a CPU (running or runnable in at least half their readings): the suggested ``num_workers`` shares
    the cores among every rank on the node. Whether the workers want a CPU counts, not how busy the node is:
    other load comes and goes, and workers that wait on a full queue cost nothing."""
    stats = rank_stats(job, windows, config)
    nodes: dict[str | None, list[RankStats]] = {}
    for s in stats:
        nodes.setdefault(s.rank.host, []).append(s)
    for host, ranks in nodes.items():
        if len(ranks) < 2:
            continue
        latest = ranks[0].window.latest
        cores = latest.host.usable_cpu_count or latest.host.cpu_count
        # Each rank's count as its loader last reported it in the window: a rank's latest sample may lack its
        # loader (a report late on a busy node), which would count its workers as none.
        workers = sum(max((x.num_workers or 0 for x in s.window.samples), default=0) for s in ranks)
        activity = [a for s in ranks if (a := worker_activity(s.window)) is not None]
        wanting = statistics.median(a.busy_share for a in activity) if activity else 0.0
        if not cores or workers + len(ranks) <= cores or wanting < th.WORKER_BUSY_SHARE:
            continue
        demand = sum(s.main_busy or 0.0 for s in ranks) + sum(a.cpu_cores or 0.0 for a in activity)
        per_rank = max(0, cores // len(ranks) - 1)
        where = f" on {host}" if host else ""
        return JobFinding(
            Finding(
                severity=WARNING,
                title=f"{len(ranks)} ranks and {count(workers, 'DataLoader worker')} share "
                f"{count(cores, 'core')}{where}",
                detail=f"{len(ranks)} ranks{where} start {count(workers, 'worker')} in all, {workers + len(ranks)} "
                f"processes for {count(cores, 'usable core')}; the workers want a CPU {pct(wanting)} of the time and "
                f"the job keeps {demand:.1f} cores busy",
                action=(
                    f"Set num_workers={per_rank} on every rank: {count(cores, 'core')} ÷ {len(ranks)} ranks on the "
                    "node, less one core each for the rank's own main process. Workers beyond the cores only take "
                    "turns on them and take CPU from the ranks, which then launch their work late."
                ),
                source=SOURCE_EXTERNAL,
                evidence={
                    "host": host,
                    "ranks": len(ranks),
                    "workers": workers,
                    "cores": cores,
                    "workers_busy_share": round(wanting, 2),
                    "job_cpu_cores": round(demand, 2),
                },
                suggest={"num_workers": per_rank},
            ),
            ranks[0].rank.pid,
            tuple(s.rank.pid for s in ranks),
        )
    return None
