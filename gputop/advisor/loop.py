"""What a window says about a training loop beyond one reader's median: what its DataLoader workers do, the
passes (epochs) it started, how busy its main thread is. Several rules read each, once per window.
"""

from __future__ import annotations

from gputop.advisor.readers import (
    DATA_WAIT_SHARE,
    HOST_CPU,
    MAIN_THREAD_BUSY,
    MAIN_THREAD_RUNNING,
    WORKER_USS,
    WORKERS_CPU,
    Reader,
)
from gputop.advisor.samples import JobSample
from gputop.advisor.window import JobWindow
from gputop.frozen import immutable


@immutable
class WorkerActivity:
    """What a window says the DataLoader workers do.

    ``busy_share`` is the share of (sample, worker) readings in which a worker was on a CPU or waiting for one
    (state R, or 50 % of a core or more): a CPU-bound worker stays runnable even when other processes leave it
    little CPU, where its CPU % alone would make it look idle. ``disk_share`` is the share in disk sleep (D).
    ``cpu_cores`` is what the workers used together, from their CPU time (an integral, where a state is a point
    sample: a worker on a CPU a fifth of the time is read runnable in half of six readings one window in
    ten); ``host_cpu_percent`` is how busy the host's CPUs were, which tells whether a runnable worker could
    have had a CPU.
    """

    count: int
    busy_share: float
    disk_share: float
    cpu_cores: float | None
    uss_bytes_per_worker: float | None
    host_cpu_percent: float | None = None


def worker_activity(window: JobWindow) -> WorkerActivity | None:
    """The workers' activity over a window; None when no sample saw a worker."""
    return window.cached_of("worker_activity", _worker_activity)


def _worker_states(sample: JobSample) -> tuple[int, int, int]:
    busy = disk = readings = 0
    for worker in sample.view.workers:
        host = worker.host
        if host.status is None:
            continue
        readings += 1
        busy += int(host.status == "running" or (host.cpu_percent or 0.0) >= 50.0)
        disk += int(host.status == "disk-sleep")
    return readings, busy, disk


WORKER_STATES = Reader("worker states", _worker_states)
"""``(readings, busy, in disk sleep)`` among a sample's workers."""


def _worker_activity(window: JobWindow) -> WorkerActivity | None:
    readings, busy, disk = window.total(WORKER_STATES) or (0, 0, 0)
    if not readings:
        return None
    cpu = window.median(WORKERS_CPU)
    uss = window.median(WORKER_USS)
    return WorkerActivity(
        count=len(window.latest.view.workers),
        busy_share=busy / readings,
        disk_share=disk / readings,
        cpu_cores=None if cpu is None else cpu / 100,
        uss_bytes_per_worker=uss,
        host_cpu_percent=window.median(HOST_CPU),
    )


@immutable
class PassStarts:
    """The passes (epochs) a window saw start, from the probe.

    ``lost_share`` is the share of the window spent from a pass's start (its iterator created, its workers
    started) to its first batch, beyond what a pass whose workers were already running would spend: such a pass
    waits for its first batch about as long as the loop waits for any other batch (``batch_wait_s``).
    """

    passes: int
    pass_start_s: float
    batch_wait_s: float
    lost_share: float


def pass_starts(window: JobWindow) -> PassStarts | None:
    """The window's pass starts, or None without the probe's timing or a pass started within it."""
    latest = window.latest.loader
    if latest is None or latest.pass_start_s is None:
        return None
    # From the first sample of this loader: before it, the job may not have built it yet.
    since, first = next(
        (s.time, s.loader) for s in window.samples if s.loader and s.loader.loader_id == latest.loader_id
    )
    passes = latest.passes - first.passes
    span = window.latest.time - since
    if passes < 1 or span <= 0:
        return None
    starting = min(span, passes * latest.pass_start_s)
    waited = (window.median(DATA_WAIT_SHARE) or 0.0) * span
    batch_wait = max(0.0, waited - starting) / max(1, latest.batches - first.batches - passes)
    lost = passes * max(0.0, latest.pass_start_s - batch_wait)
    return PassStarts(passes, latest.pass_start_s, batch_wait, min(1.0, lost / span))


def main_thread_busy(window: JobWindow) -> float | None:
    """The share of the time the main thread was on a CPU or waiting for one.

    Its measured CPU share, or, where other processes keep it off the CPUs, the share of samples it was runnable
    (state R), whichever is larger: CPU time alone would make a thread starved of CPU look idle.
    """
    busy = window.median(MAIN_THREAD_BUSY)
    runnable = window.share(MAIN_THREAD_RUNNING)
    known = [v for v in (busy, runnable) if v is not None]
    return max(known) if known else None
