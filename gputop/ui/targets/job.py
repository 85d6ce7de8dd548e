"""Which job the job view shows, and which of the advisor's findings belong to it: pure, from the jobs of a snapshot
(``gputop.jobs``), the cursor and the focus."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.frozen import immutable
from gputop.jobs import Job
from gputop.model import PHASES, Advice, Phase

STRAGGLER = "straggler"
"""The id of the job rule that names the rank holding the others back (gputop/advisor/rules/jobs.py)."""


def job_of(jobs: Sequence[Job], pid: int) -> Job | None:
    """The job ``pid`` belongs to: as one of its ranks, its torchrun agent, or a DataLoader worker of a rank."""
    for job in jobs:
        if pid in job.pids or pid in job.agent_pids or any(w.pid == pid for r in job.ranks for w in r.view.workers):
            return job
    return None


def job_target(jobs: Sequence[Job], selected_pid: int | None, focus_pid: int | None) -> Job | None:
    """The job to open: the selected process's, else the focus's, else the first job of several ranks."""
    for pid in (selected_pid, focus_pid):
        job = None if pid is None else job_of(jobs, pid)
        if job is not None:
            return job
    return next((j for j in jobs if len(j.ranks) >= 2), None)


def job_findings(advice: Sequence[Advice], job: Job) -> tuple[Advice, ...]:
    """The findings about the job: its own (``advice.job``) and those about any of its ranks."""
    pids = set(job.pids)
    return tuple(a for a in advice if a.job == job.id or pids.intersection(a.concerns))


@immutable
class StragglerMark:
    """The rank an active straggler finding names, and the phase it names (``evidence["phase"]``, where the step
    measured it): the job view marks that phase, so that the table and the finding never disagree."""

    pid: int
    phase: Phase | None = None


def straggler_mark(advice: Sequence[Advice], job: Job) -> StragglerMark | None:
    """The straggler an active finding names in this job, if there is one. Its phase is checked against the
    phases gputop knows: a recording's or a remote host's finding may name anything."""
    for a in advice:
        if a.id == STRAGGLER and a.pid in job.pids:
            named = a.evidence.get("phase")
            return StragglerMark(a.pid, next((p for p in PHASES if p == named), None))
    return None
