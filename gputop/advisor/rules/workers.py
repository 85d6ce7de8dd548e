"""Rules on the DataLoader workers themselves: too many of them, their memory growing, CUDA inside them."""

from __future__ import annotations

import math

from gputop.advisor import thresholds as th
from gputop.advisor.loop import worker_activity
from gputop.advisor.readers import DATA_WAIT_SHARE, HOST_CPU, ReaderFamily
from gputop.advisor.rules.base import Finding, count, loader_line, pct, recent_window
from gputop.advisor.samples import JobSample
from gputop.advisor.suggest import cores_per_rank
from gputop.advisor.trends import steady_rise
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes, fmt_duration
from gputop.model import CRITICAL, INFO, SOURCE_BOTH, SOURCE_EXTERNAL, WARNING


def _steady_uss(steady: frozenset[int], sample: JobSample) -> float | None:
    values = [x.uss_bytes for x in sample.view.workers if x.pid in steady]
    known = [v for v in values if v is not None]
    return float(sum(known)) if len(known) == len(values) >= len(steady) else None


STEADY_USS = ReaderFamily("steady workers' uss_bytes", _steady_uss)
"""The own memory (USS) of a set of workers, summed where each of them reports it, by their PIDs."""


def too_many_workers(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """More CPU-bound workers than cores on a saturated host, or many idle workers holding memory."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    latest = recent.latest
    workers = latest.num_workers
    activity = worker_activity(recent)
    if not workers or activity is None:
        return None
    cores = cores_per_rank(latest)
    memory = activity.uss_bytes_per_worker * workers if activity.uss_bytes_per_worker is not None else None
    # The cheap conditions of both findings first: most windows meet neither.
    crowded = latest.local_ranks == 1 and workers > cores and activity.busy_share >= th.WORKER_BUSY_SHARE
    idle = activity.busy_share < th.WORKER_IDLE_SHARE and memory is not None and memory >= th.WORKER_MEMORY_LARGE_BYTES
    if not (crowded or idle):
        return None
    host_cpu = recent.median(HOST_CPU)
    wait = recent.median(DATA_WAIT_SHARE)
    evidence: dict[str, object] = {
        "num_workers": workers,
        "ranks": latest.local_ranks,
        "usable_cores_per_rank": cores,
        "workers_busy_share": round(activity.busy_share, 2),
        "workers_cpu_cores": None if activity.cpu_cores is None else round(activity.cpu_cores, 2),
        "host_cpu_percent": host_cpu,
        "data_wait_share": None if wait is None else round(wait, 3),
        "workers_uss_bytes": None if memory is None else int(memory),
    }
    oversubscribed = (
        latest.local_ranks == 1  # ranks sharing a node: node-cpu-oversubscribed counts all their workers
        and workers > cores
        and activity.busy_share >= th.WORKER_BUSY_SHARE
        and host_cpu is not None
        and host_cpu >= th.HOST_CPU_SATURATED_PERCENT
    )
    if oversubscribed:
        fewer = max(1, cores - 1)
        return Finding(
            severity=WARNING,
            title=f"{workers} CPU-bound workers share {count(cores, 'core')}",
            detail=f"{workers} workers × {count(latest.local_ranks, 'rank')} on {count(cores, 'usable core')} per "
            f"rank; the host's CPUs are {host_cpu:.0f}% busy and the workers runnable {pct(activity.busy_share)} of "
            "the time",
            action=(
                f"Set num_workers={fewer}{loader_line(latest)}"
                f": workers beyond the cores only take turns on them, and take CPU from "
                "the main process, which then launches work late; each also holds its own memory."
            ),
            source=SOURCE_EXTERNAL if wait is None else SOURCE_BOTH,
            evidence=evidence,
            suggest={"num_workers": fewer},
        )
    if not (
        activity.busy_share < th.WORKER_IDLE_SHARE
        and wait is not None
        and wait < th.DATA_WAIT_NONE
        and memory is not None
        and memory >= th.WORKER_MEMORY_LARGE_BYTES
    ):
        return None
    fewer = max(1, workers // 2, math.ceil((activity.cpu_cores or 0.0) * th.WORKER_MARGIN))
    if fewer >= workers:
        return None
    return Finding(
        severity=INFO,
        title=f"{workers} workers mostly idle, holding {fmt_bytes(memory)}",
        detail=f"the workers are runnable {pct(activity.busy_share)} of the time and the loop waits for data "
        f"{pct(wait)} of each step; together they hold {fmt_bytes(memory)} of their own",
        action=(
            f"Set num_workers={fewer}{loader_line(latest)}"
            f": half the workers (or their CPU use with 25% headroom) keep up, and free "
            f"about {fmt_bytes(memory * (workers - fewer) / workers)}. Check that the data wait stays under 10%."
        ),
        source=SOURCE_BOTH,
        evidence=evidence,
        suggest={"num_workers": fewer},
    )


def worker_memory_growth(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The workers' own memory (USS) rises steadily: they copy the Dataset's Python objects as they read them."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    steady = frozenset(x.pid for x in recent.samples[0].view.workers) & {x.pid for x in recent.latest.view.workers}
    if not steady:
        return None
    total = STEADY_USS(steady)
    rise = recent.rise(total)
    if rise is None or rise <= 0 or rise < th.WORKER_GROWTH_MIN_BYTES:
        return None  # the points are not even gathered
    growth = steady_rise(recent.points(total), th.WORKER_GROWTH_MIN_BYTES)
    if growth is None:
        return None
    rise, slope, r2 = growth.rise, growth.slope, growth.r2
    full_s = recent.latest.host.memory_available_bytes / slope
    return Finding(
        severity=CRITICAL if full_s <= th.FULL_WITHIN_S[CRITICAL] else WARNING,
        title=f"Worker memory grows {fmt_bytes(slope * 60)}/min",
        detail=f"own memory (USS) of {count(len(steady), 'worker')}: up {fmt_bytes(rise)} in {recent.span_s:.0f} s, "
        f"steadily (r² {r2:.2f}); host memory would run out in {fmt_duration(full_s)}",
        action=(
            "The Dataset keeps Python objects (lists, dicts, strings) that every worker copies page by page as it "
            "reads them, because reading an object writes its reference count: keep the data in numpy arrays, "
            "tensors or Arrow columns instead (pytorch/pytorch#13246)."
        ),
        source=SOURCE_EXTERNAL,
        evidence={
            "workers": len(steady),
            "rise_bytes": int(rise),
            "span_s": round(recent.span_s, 1),
            "rate_bytes_per_s": int(slope),
            "r2": round(r2, 3),
            "host_full_in_s": int(full_s),
        },
    )


def cuda_in_worker(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """A DataLoader worker holds a CUDA context of its own."""
    rows = w.latest.worker_gpu_rows
    if not rows:
        return None
    held = sum(r.gpu_memory_bytes or 0 for r in rows)
    pids = tuple(sorted({r.pid for r in rows}))
    one = len(pids) == 1
    return Finding(
        severity=WARNING,
        title=f"{count(len(pids), 'DataLoader worker')} {'holds' if one else 'hold'} a CUDA context",
        detail=f"worker PID{'' if one else 's'} {', '.join(map(str, pids))} on the GPU with {fmt_bytes(held)}",
        action=(
            "Keep CUDA out of the Dataset and collate_fn: return CPU tensors and move the batch to the GPU in the "
            "training loop (pin_memory=True, .to(device, non_blocking=True)). Each worker's context costs "
            "hundreds of MiB of GPU memory, and CUDA does not survive a fork."
        ),
        source=SOURCE_EXTERNAL,
        evidence={"worker_pids": pids, "gpu_memory_bytes": held},
    )
