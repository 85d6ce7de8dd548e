"""Training jobs: the processes of one run grouped together, the unit the job view and the job rules reason about.

A job is, in this order of precedence:

- **torchrun**: ranks started by a launcher, grouped by the launcher's identity of the run (``TORCHELASTIC_RUN_ID``,
  ``MASTER_ADDR``, ``MASTER_PORT`` from each rank's environment or probe report), so that the same job has the
  same id on every host it runs on; ranks without readable variables join their ``pt_elastic`` agent's job;
- **processes**: training processes started below one training process (its ranks), or sharing a Python parent that
  is not one of them (``torch.multiprocessing.spawn``); processes that merely share init, a shell or a service
  manager are not one job;
- **single**: any other training process.

Only processes with training evidence (``TrainingView.evidence``) make jobs: a plain holder of GPU memory is none.
A job is one user's: ranks are grouped only with ranks of the same user, since any user can start a process whose
environment names another user's run (``RANK=1`` and root's run id). Across hosts, a host's ranks join a job only
where they agree with it: the same world size, and no rank number another host already holds.
Pure: computed from a snapshot whenever needed, never stored, so replays and remote snapshots have jobs too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Final, Literal

from gputop.frozen import immutable
from gputop.model import ROLE_TORCHRUN_AGENT, HostProcess, Snapshot, TrainingView

JobKind = Literal["torchrun", "processes", "single"]
JOB_TORCHRUN: Final = "torchrun"
JOB_PROCESSES: Final = "processes"
JOB_SINGLE: Final = "single"


@immutable
class JobRank:
    """One process of a job: its view, its rank (None for a job without a launcher) and the host it runs on
    (None on the local machine)."""

    view: TrainingView
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None

    @property
    def pid(self) -> int:
        return self.view.pid


@immutable
class Job:
    """A training job: ``id`` is stable for its life (and the same on every host for a torchrun job). ``user`` is
    whom every rank runs as (None where it could not be read)."""

    id: str
    kind: JobKind
    ranks: tuple[JobRank, ...]
    world_size: int | None = None
    agent_pids: tuple[int, ...] = ()
    user: str | None = None

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(r.pid for r in self.ranks)

    @property
    def hosts(self) -> tuple[str | None, ...]:
        """The hosts the job runs on, in order of first appearance."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    def rank_of(self, pid: int) -> JobRank | None:
        return next((r for r in self.ranks if r.pid == pid), None)


def short_id(*parts: object) -> str:
    """An 8-hex-digit id from the parts that name a job."""
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:8]


def find_jobs(snap: Snapshot, host: str | None = None, singles: bool = True) -> tuple[Job, ...]:
    """The jobs of one snapshot; ``host`` names the machine it comes from (None: this one). Without ``singles``,
    the training processes that are no job of several (``JOB_SINGLE``) are left out, and their ids not worked out:
    the advisor, which judges only jobs of several ranks, asks at every snapshot."""
    views = [v for v in snap.training if v.trains and v.role != ROLE_TORCHRUN_AGENT]
    parent_view = {rank: v for v in snap.training for rank in v.ranks}
    hosts = {h.pid: h for h in snap.host_processes}
    parents = {h.pid: h.ppid for h in hosts.values() if _launches_ranks(hosts.get(h.ppid) if h.ppid else None)}
    groups: dict[tuple[object, ...], list[TrainingView]] = {}
    for view in views:
        launch = view.launch
        above = parent_view.get(view.pid)
        user = _user(hosts, view.pid)
        # Every key ends with the user: a job is one user's processes, whatever variables they carry.
        if launch is not None and launch.distributed and (launch.run_id or launch.master_addr):
            key: tuple[object, ...] = (JOB_TORCHRUN, launch.run_id, launch.master_addr, launch.master_port, user)
        elif above is not None:
            below = JOB_TORCHRUN if above.role == ROLE_TORCHRUN_AGENT else JOB_PROCESSES
            key = (below, "below", host, above.pid, user)
        else:
            key = ("parent", host, parents.get(view.pid), user)
        groups.setdefault(key, []).append(view)
    jobs = []
    for key, members in groups.items():
        user = key[-1] if isinstance(key[-1], str) else None
        if key[0] == "parent" and (len(members) == 1 or key[2] is None):
            if singles:
                jobs += [_single(v, host, user) for v in members]
            continue
        kind: JobKind = JOB_TORCHRUN if key[0] == JOB_TORCHRUN else JOB_PROCESSES
        ranks = tuple(sorted((_rank(v, host) for v in members), key=_rank_order))
        sizes = [v.launch.world_size for v in members if v.launch is not None and v.launch.world_size]
        agent_pids = tuple(sorted({parent_view[v.pid].pid for v in members if v.pid in parent_view}))
        jobs.append(Job(short_id(*key), kind, ranks, max(sizes) if sizes else None, agent_pids, user))
    return tuple(sorted(jobs, key=lambda j: (j.kind != JOB_TORCHRUN, -len(j.ranks), j.pids)))


def merge_jobs(per_host: Sequence[tuple[str, Sequence[Job]]]) -> tuple[Job, ...]:
    """Jobs of several hosts, with the ranks of a job that runs on several of them (the same id, so the same run and
    user) in one. A host whose ranks contradict the job gathered so far (another world size, a rank number that
    another host holds) is not added to it: its ranks stay a job of their own, with an id of its own, so that a
    host cannot put ranks into another's job by naming its run."""
    merged: dict[str, Job] = {}
    for name, jobs in per_host:
        for job in jobs:
            known = merged.get(job.id)
            if known is not None and not _agrees(known, job):
                job = replace(job, id=short_id(job.id, name))
                known = merged.get(job.id)
            if known is None:
                merged[job.id] = job
                continue
            ranks = tuple(sorted(known.ranks + job.ranks, key=_rank_order))
            world = known.world_size or job.world_size
            merged[job.id] = Job(job.id, known.kind, ranks, world, known.agent_pids + job.agent_pids, known.user)
    return tuple(merged.values())


def _agrees(known: Job, joining: Job) -> bool:
    """Whether ``joining``, the same run seen from another host, can be more of ``known``: the same world size
    where both say one, and none of the rank numbers ``known`` holds already."""
    if known.world_size and joining.world_size and known.world_size != joining.world_size:
        return False
    held = {r.rank for r in known.ranks if r.rank is not None}
    return not any(r.rank in held for r in joining.ranks)


def _launches_ranks(parent: HostProcess | None) -> bool:
    """Whether processes below ``parent`` can be one job's ranks: a Python process (``torch.multiprocessing.spawn``,
    ``multiprocessing``), not init, a shell or a service manager, below which unrelated jobs share a parent."""
    if parent is None or parent.pid <= 1:
        return False
    name = (parent.name or "").lower()
    return name.startswith(("python", "pt_"))


def _single(view: TrainingView, host: str | None, user: str | None) -> Job:
    return Job(short_id(JOB_SINGLE, host, view.pid), JOB_SINGLE, (_rank(view, host),), user=user)


def _user(hosts: dict[int, HostProcess], pid: int) -> str | None:
    known = hosts.get(pid)
    return None if known is None else known.user


def _rank(view: TrainingView, host: str | None) -> JobRank:
    launch = view.launch
    rank = launch.rank if launch is not None else None
    if rank is None:
        rank = view.probe.rank
    local = launch.local_rank if launch is not None else view.probe.local_rank
    return JobRank(view, rank, local, host)


def _rank_order(rank: JobRank) -> tuple[int, str, int]:
    return (rank.rank if rank.rank is not None else 1 << 30, rank.host or "", rank.pid)
