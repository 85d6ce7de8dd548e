"""Who holds a saturated host's CPUs when a job's CPU-bound workers get less than its usable cores.

Without it a finding would say both "the workers use 0.5 of 2 usable cores" and "the 2 usable cores are spent":
each true, together a contradiction, when other users' processes hold the cores. The host's busy share and the
job's own CPU come from the window (medians); who holds the rest comes from the latest snapshot's
``HostInfo.cpu_takers`` (the last process-table scan), less the job's own processes.
"""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.readers import HOST_CPU, Reader
from gputop.advisor.samples import JobSample
from gputop.advisor.window import JobWindow
from gputop.frozen import immutable
from gputop.model import CpuUse


@immutable
class Contention:
    """A saturated host whose CPUs other processes hold: ``others_cores`` of its ``cpu_count`` beyond the job's
    ``job_cores``; the other ``processes`` and ``users`` that used the most, in cores; ``named`` is False where the
    snapshots do not say who (recorded before gputop kept it, or before its second process-table scan)."""

    host_busy_percent: float
    cpu_count: int
    job_cores: float
    others_cores: float
    processes: tuple[CpuUse, ...] = ()
    users: tuple[CpuUse, ...] = ()
    named: bool = True

    def who(self) -> str:
        """Who holds the cores, in words, or why they cannot be named."""
        if not self.named:
            return "which ones, these snapshots do not say"
        return self.holders() or (
            "none that gputop can see holds a tenth of a core (/proc may hide other users' processes: hidepid)"
        )

    def holders(self) -> str:
        """``stress (PID 4242, bob) 1.0, ffmpeg (PID 77, alice) 0.4``, or the users where no process is named."""
        if self.processes:
            return ", ".join(
                f"{p.name or '?'} (PID {p.pid}{f', {p.user}' if p.user else ''}) {p.cpu_percent / 100:.1f}"
                for p in self.processes
            )
        return ", ".join(f"{u.user}'s processes {u.cpu_percent / 100:.1f}" for u in self.users)


def _job_cpu(sample: JobSample) -> float | None:
    """The training process's CPU and its workers', in % of a core."""
    own = sample.process.cpu_percent if sample.process is not None else None
    workers = sample.view.workers_cpu_percent
    if own is None and workers is None:
        return None
    return (own or 0.0) + (workers or 0.0)


JOB_CPU = Reader("job cpu_percent", _job_cpu)
MAIN_CPU = Reader("process cpu_percent", lambda s: s.process.cpu_percent if s.process is not None else None)
"""The training process's own CPU, in % of a core: what its workers leave it of the cores."""


TOP_NAMED = 3


def contention(window: JobWindow) -> Contention | None:
    """Who holds the host's CPUs beside the job, or None when the host is not saturated, the job's own processes
    use what is busy, or several ranks share the host (their CPU is the job's, not others')."""
    latest = window.latest
    if latest.local_ranks != 1:
        return None
    busy = window.median(HOST_CPU)
    job = window.median(JOB_CPU)
    if busy is None or job is None or busy < th.HOST_CPU_SATURATED_PERCENT:
        return None
    cpu_count = latest.host.cpu_count
    others = busy / 100 * cpu_count - job / 100
    if others < th.OTHERS_CPU_CORES:
        return None
    takers = latest.host.cpu_takers
    if takers is None:
        return Contention(busy, cpu_count, job / 100, others, named=False)
    mine = {latest.pid, *(w.pid for w in latest.view.workers)}
    least = th.CPU_HOLDER_CORES * 100
    processes = tuple(p for p in takers.processes if p.pid not in mine and p.cpu_percent >= least)[:TOP_NAMED]
    user = latest.process.user if latest.process is not None else None
    now = _job_cpu(latest) or 0.0
    users = []
    for u in takers.users:  # the job's user, less the job: what that user's other processes hold
        held = u.cpu_percent - now if u.user == user else u.cpu_percent
        if held >= least:
            users.append(CpuUse(round(held, 1), u.user))
    users.sort(key=lambda u: -u.cpu_percent)
    return Contention(busy, cpu_count, job / 100, others, processes, tuple(users[:TOP_NAMED]))
