"""Rules on the input pipeline: the loop waiting for data, loading in the main process, pageable batches,
workers started at every epoch."""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.contention import JOB_CPU, MAIN_CPU, Contention, contention
from gputop.advisor.loop import WorkerActivity, main_thread_busy, pass_starts, worker_activity
from gputop.advisor.readers import (
    DATA_WAIT_SHARE,
    GPU_BUSY,
    PASS_START_WAIT_SHARE,
    STEPS_PER_S,
    WORKER_BATCH_P95_S,
    WORKER_BATCH_S,
    Reader,
)
from gputop.advisor.rules.base import (
    Finding,
    count,
    cuda_devices,
    gpu_words,
    last_found,
    loader_line,
    pct,
    recent_window,
    remembered,
    wait_severity,
)
from gputop.advisor.suggest import (
    CPU,
    IO,
    JOB_CORES,
    STORAGE,
    WorkerPlan,
    cores_per_rank,
    loop_work_s,
    plan_workers,
    prefetch_needed,
    with_headroom,
    worker_bottleneck,
    workers_keeping_up,
    workers_needed,
)
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes
from gputop.frozen import immutable
from gputop.model import INFO, PIN_OFF, SOURCE_BOTH, SOURCE_EXTERNAL, SOURCE_PROBE, WARNING, PinMemoryStatus

ENOUGH_WORKERS = "enough workers"
"""The plan's limit where the workers already deliver more batches than the loop takes (``workers_keeping_up``)."""
CHEAPER_SAMPLES = "lighter transforms, decode once and cache the decoded data, or move augmentation to the GPU"

PCIE_RX = Reader("pcie_rx_bytes_per_s", lambda s: max((g.pcie_rx_bytes_per_s or 0 for g in s.gpus), default=None))
"""What flows from the host to the process's GPUs, the most of any of them."""


@immutable
class QueuePlan:
    """The input queue's depth against the slow batches: ``slow_s`` (95th percentile of a worker's batch time) and
    the ``covered_s`` the queue of ``current`` × workers batches gives them; ``suggested`` where a deeper one is
    needed beyond the noise."""

    current: int
    slow_s: float
    covered_s: float
    suggested: int | None


def _queue_plan(
    prefetch: int | None, slow_s: float | None, workers: int, wait: float, steps: float, told: int | None
) -> QueuePlan | None:
    """Whether the queue covers the slow batches, and the ``prefetch_factor`` that would; a value told before
    stands while a new one is within a quarter of it (``WORKERS_NOISE``), and none is told while the slow batches
    exceed what the queue covers by no more than that noise."""
    if prefetch is None or slow_s is None or prefetch < 1:
        return None
    covered = prefetch * workers * loop_work_s(wait, steps)
    if slow_s <= covered * (1 + th.WORKERS_NOISE):
        return QueuePlan(prefetch, slow_s, covered, None)
    needed = prefetch_needed(slow_s, workers, wait, steps)
    if told is not None and abs(needed - told) <= max(1, th.WORKERS_NOISE * told):
        needed = told
    return QueuePlan(prefetch, slow_s, covered, needed if needed > prefetch else None)


def _queue_action(workers: int, batch_s: float, enough: str, queue: QueuePlan | None, line: str) -> str:
    """What to say where the workers keep up (``enough``: by how much) and the loop still waits: the queue's
    depth, from the slow batches."""
    rate = workers / batch_s
    start = (
        f"More workers would not help: each of the {count(workers, 'worker')} makes a batch in "
        f"{batch_s * 1000:.0f} ms, {rate:.0f} batches/s together, {enough}"
    )
    if queue is None:
        return (
            f"{start}; the wait is not their number. Batches come back in the order they were asked for, so one slow "
            "batch holds the loop: a higher prefetch_factor rides that out; where the host's cores are busy, the "
            "workers and the main process wait for them too."
        )
    slow = f"the slowest 5% of batches take {queue.slow_s * 1000:.0f} ms in a worker"
    queued = (
        f"the queue of {queue.current} × {count(workers, 'worker')} batches is asked for "
        f"{queue.covered_s * 1000:.0f} ms ahead"
    )
    if queue.suggested is not None:
        return (
            f"Set prefetch_factor={queue.suggested}{line} ({queue.current} now). {start}, but batches come back in "
            f"the order they were asked for, and {slow}, while {queued}: {queue.suggested} covers them. Each "
            "worker then holds that many batches in host memory."
        )
    return (
        f"{start}, and {queued}, which covers the slow ones ({slow}): the wait is neither the workers' number nor "
        "the queue's depth. Where the host's cores are busy, the workers and the main process wait for them."
    )


def _more_workers_action(
    plan: WorkerPlan,
    workers: int,
    cores: int,
    held: Contention | None = None,
    line: str = "",
    job_cores: float | None = None,
    batch_s: float | None = None,
    keeping_up: float | None = None,
    queue: QueuePlan | None = None,
) -> str:
    """What to do about a starved loop: the worker count (at ``line``, where the DataLoader was built), or what to
    do where more workers cannot help."""
    if plan.suggested is not None:
        capped = f", capped at {plan.suggested} by {plan.limit}" if plan.limit else ""
        how = (
            f"{count(workers, 'worker')} × step time ÷ compute time"
            if batch_s is None
            else f"a worker's {batch_s * 1000:.0f} ms a batch ÷ the loop's own work per step"
        )
        action = (
            f"Set num_workers={plan.suggested}{line} ({workers} now): {how} is {plan.needed} with 25% headroom{capped}."
        )
        if plan.bottleneck == IO:
            action += (
                " Workers that wait on I/O can outnumber the cores; caching the data or a higher prefetch_factor "
                "also helps."
            )
        return action
    if plan.limit == ENOUGH_WORKERS and batch_s is not None:
        enough = (
            "more than the loop takes"
            if keeping_up is not None and keeping_up <= workers
            else "within the measurement's noise (a quarter) of what the loop takes"
        )
        return _queue_action(workers, batch_s, enough, queue, line)
    if plan.limit == JOB_CORES:
        return (
            f"More workers cannot help: the job's own processes already use {job_cores or 0:.1f} of its {cores} "
            "usable cores (each batch costs the workers' collation and pickling and the main process's unpickling "
            "too), and more workers would take turns on them: the rest of the wait is the CPU's. Cache the data, "
            "decode it once, or give the job more cores."
        )
    if plan.bottleneck == STORAGE:
        return (
            "More workers cannot help: they wait on the storage. Use faster or local storage, cache the dataset "
            "in memory, or store it in fewer, larger files; a higher prefetch_factor rides out slow reads."
        )
    if plan.bottleneck == CPU and held is not None:
        top = held.processes[0] if held.processes else None
        who = (
            f" ({top.name or '?'}, PID {top.pid}{f' of {top.user}' if top.user else ''}, the most: "
            f"{top.cpu_percent / 100:.1f})"
            if top is not None
            else ""
        )
        return (
            f"More workers cannot help: the workers are CPU-bound and other processes hold "
            f"{held.others_cores:.1f} of the host's {held.cpu_count} cores{who}. Free those cores, or give the job "
            "cores of its own (taskset, a cgroup cpuset, the scheduler's CPU request); cheaper samples help "
            f"too: {CHEAPER_SAMPLES}."
        )
    if plan.bottleneck == CPU:
        return (
            f"More workers cannot help: the workers are CPU-bound and the {cores} usable cores are spent. Make "
            f"each sample cheaper: {CHEAPER_SAMPLES}."
        )
    return (
        f"The workers wait on I/O and already reach the cap ({plan.limit}): cache the data, use faster storage, "
        "or raise prefetch_factor."
    )


def steady_wait(recent: JobWindow) -> float | None:
    """The share of each step the loop waits for data, less its waits for workers starting up: at each epoch
    without ``persistent_workers`` (``persistent-workers-off``'s), and in the first epoch whatever the setting.
    More workers make those waits longer, not shorter, and the first one is paid once: workers slow to start,
    on a host whose CPUs are busy or with a slow ``worker_init_fn``, do not starve the loop's steps."""
    wait = recent.median(DATA_WAIT_SHARE)
    loader = recent.latest.loader
    if wait is None or loader is None:
        return wait
    if loader.effective.persistent_workers is False or loader.passes <= 1:
        starting = recent.median(PASS_START_WAIT_SHARE)
        if starting is not None:
            wait = max(0.0, wait - starting)
    return wait


def data_starved(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The loop waits for data a large share of each step while the GPU is not kept busy."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    latest = recent.latest
    workers = latest.num_workers
    if not workers:
        return None
    wait = steady_wait(recent)
    if wait is None or wait < th.DATA_WAIT_INFO:
        return None
    steps = recent.median(STEPS_PER_S)
    if not steps:
        return None
    busy = recent.median(GPU_BUSY)
    if busy is not None and busy >= th.GPU_FED_FROM_PERCENT:
        return None
    activity = worker_activity(recent)
    held = contention(recent) if activity is None or worker_bottleneck(activity) == CPU else None
    memory = latest.host.memory_available_bytes
    told = _told(last_found(recent, "data-starved"), workers)
    job = recent.median(JOB_CPU)
    job_cores = None if job is None else round(job / 100, 1)
    main = recent.median(MAIN_CPU)
    main_cores = None if main is None else round(main / 100, 1)
    batch = recent.median(WORKER_BATCH_S)
    batch_s = None if batch is None else round(batch, 4)
    slow = recent.median(WORKER_BATCH_P95_S)
    slow_s = None if slow is None else round(slow, 4)
    prefetch = latest.loader.effective.prefetch_factor if latest.loader is not None else None
    told_prefetch = _told_prefetch(last_found(recent, "data-starved"), prefetch)
    inputs = (workers, wait, steps, busy, activity, cores_per_rank(latest), memory, held, loader_line(latest))
    queue = (slow_s, prefetch if prefetch is not None else th.PREFETCH_DEFAULT, told_prefetch)
    return remembered(recent, "data-starved", (*inputs, told, job_cores, batch_s, main_cores, queue), _starved)


def _told(last: Finding | None, workers: int) -> tuple[int, int] | None:
    """The worker count ``data-starved`` last suggested to this process and the count it was computed from, while
    the process still runs fewer workers than that."""
    if last is None:
        return None
    suggested, needed = last.suggest.get("num_workers"), last.evidence.get("needed_workers")
    if not isinstance(suggested, int) or not isinstance(needed, int) or suggested <= workers:
        return None
    return suggested, needed


def _told_prefetch(last: Finding | None, prefetch: int | None) -> int | None:
    """The ``prefetch_factor`` ``data-starved`` last suggested to this process, while it still runs a smaller one."""
    if last is None:
        return None
    suggested = last.suggest.get("prefetch_factor")
    if not isinstance(suggested, int) or (prefetch is not None and suggested <= prefetch):
        return None
    return suggested


def _within_noise(plan: WorkerPlan, told: tuple[int, int] | None) -> bool:
    """Whether ``plan``'s count is within the noise of the one already suggested (``WORKERS_NOISE``)."""
    if told is None or plan.suggested is None:
        return False
    return abs(plan.suggested - told[0]) <= max(1, th.WORKERS_NOISE * told[0])


def _starved(
    workers: int,
    wait: float,
    steps: float,
    busy: float | None,
    activity: WorkerActivity | None,
    cores: int,
    available: int,
    held: Contention | None,
    line: str,
    told: tuple[int, int] | None = None,
    job_cores: float | None = None,
    batch_s: float | None = None,
    main_cores: float | None = None,
    queue_inputs: tuple[float | None, int, int | None] = (None, th.PREFETCH_DEFAULT, None),
) -> Finding:
    """``data-starved``'s finding from what it measured; ``held``: who holds the host's CPUs beside the job;
    ``line``: where the job built its DataLoader (`` at train.py:41``), or empty; ``told``: the count suggested
    before and the one it was computed from, which stand while a new one is within the noise; ``queue_inputs``:
    the slow batches' time, the ``prefetch_factor`` in effect and the one told before."""
    bottleneck = worker_bottleneck(activity) if activity is not None else CPU
    keeping_up = None if not batch_s else workers_keeping_up(batch_s, wait, steps)
    needed = workers_needed(workers, wait, in_main_process=False) if keeping_up is None else with_headroom(keeping_up)
    uss = activity.uss_bytes_per_worker if activity is not None else None
    others = held.others_cores if held is not None and bottleneck == CPU else 0.0
    plan = plan_workers(workers, needed, bottleneck, cores, uss, available, job_cores, main_cores, others)
    if keeping_up is not None and keeping_up <= workers * (1 + th.WORKERS_NOISE) and bottleneck != STORAGE:
        # The workers keep up, or fall short by no more than the measurement's noise: a count suggested with its
        # headroom, run, measures within that of the count it came from, and is not told another.
        plan = WorkerPlan(bottleneck, needed, None, ENOUGH_WORKERS)
    now = None
    if told is not None and _within_noise(plan, told):
        now = plan.needed
        plan = WorkerPlan(plan.bottleneck, told[1], told[0], plan.limit if told[0] != told[1] else None)
        needed = told[1]
    cpu = activity.cpu_cores if activity is not None else None
    doing = {
        CPU: f"busy on the CPU ({'?' if cpu is None else f'{cpu:.1f}'} of {cores} usable cores)",
        IO: f"mostly asleep, waiting on I/O ({'?' if cpu is None else f'{cpu:.1f}'} cores)",
        STORAGE: f"in disk sleep {pct(activity.disk_share if activity else None)} of the time",
    }[bottleneck]
    detail = f"the loop waits for data {pct(wait)} of each step at {steps:.1f} steps/s; "
    detail += f"{count(workers, 'worker')}, {doing}"
    if bottleneck == CPU and held is not None:
        detail += (
            f"; the host's {held.cpu_count} CPUs are {held.host_busy_percent:.0f}% busy, "
            f"{held.others_cores:.1f} cores of it other processes': {held.who()}"
        )
    suggest: dict[str, float | int | str | bool] = {}
    if plan.suggested is not None:
        suggest = {"num_workers": plan.suggested}
    evidence: dict[str, object] = {
        "data_wait_share": round(wait, 3),
        "steps_per_s": round(steps, 2),
        "num_workers": workers,
        "bottleneck": bottleneck,
        "workers_busy_share": None if activity is None else round(activity.busy_share, 2),
        "workers_cpu_cores": None if cpu is None else round(cpu, 2),
        "usable_cores_per_rank": cores,
        "gpu_busy_percent": busy,
        "needed_workers": needed,
        "job_cpu_cores": job_cores,
        "worker_batch_s": batch_s,
        "workers_keeping_up": None if keeping_up is None else round(keeping_up, 2),
    }
    if bottleneck == CPU and held is not None:
        evidence.update(
            host_cpu_percent=held.host_busy_percent,
            job_cpu_cores=round(held.job_cores, 2),
            others_cpu_cores=round(held.others_cores, 2),
            others_pids=tuple(p.pid for p in held.processes),
        )
    slow_s, prefetch, told_prefetch = queue_inputs
    queue = None
    if plan.limit == ENOUGH_WORKERS:
        queue = _queue_plan(prefetch, slow_s, workers, wait, steps, told_prefetch)
        evidence.update(worker_batch_p95_s=slow_s, prefetch_factor=prefetch)
        if queue is not None:
            evidence["queue_covers_s"] = round(queue.covered_s, 4)
            if queue.suggested is not None:
                suggest = {"prefetch_factor": queue.suggested}
    held_cpu = held if bottleneck == CPU else None
    action = _more_workers_action(plan, workers, cores, held_cpu, line, job_cores, batch_s, keeping_up, queue)
    if now is not None and now != plan.needed:
        action += (
            f" This window's wait gives {now}: within a quarter of {plan.needed}, the measurement's noise, so "
            f"{plan.suggested} stands."
        )
    return Finding(
        severity=wait_severity(wait),
        title=f"Input-bound: the loop waits for data {pct(wait)} of each step",
        detail=detail + gpu_words(busy),
        action=action,
        source=SOURCE_BOTH if activity is not None or busy is not None else SOURCE_PROBE,
        evidence=evidence,
        suggest=suggest,
    )


def loader_in_main_process(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """``num_workers=0``: the main process loads every batch itself while the model waits."""
    recent = recent_window(w, config)
    if recent is None or recent.latest.num_workers != 0:
        return None
    wait = recent.median(DATA_WAIT_SHARE)
    steps = recent.median(STEPS_PER_S)
    if wait is None or wait < th.DATA_WAIT_INFO or not steps:
        return None
    main = main_thread_busy(recent)
    # The main thread computes for (1 - wait) of a step; what it spends on the CPU beyond that is loading.
    load_cpu = None if main is None else min(1.0, max(0.0, (main - (1.0 - wait)) / wait))
    bottleneck = IO if load_cpu is not None and load_cpu < th.LOAD_CPU_SHARE else CPU
    cores = cores_per_rank(recent.latest)
    needed = workers_needed(1, wait, in_main_process=True)
    plan = plan_workers(0, needed, bottleneck, cores, None, recent.latest.host.memory_available_bytes)
    workers = plan.suggested or 1
    kind = "on the CPU" if bottleneck == CPU else "mostly waiting on I/O"
    return Finding(
        severity=WARNING if wait >= th.DATA_WAIT_WARNING else INFO,
        title=f"num_workers=0: the main process loads the data, {pct(wait)} of each step",
        detail=f"the loop waits for data {pct(wait)} of each step at {steps:.1f} steps/s; loading runs {kind} "
        f"in the main process (main thread busy {pct(main)})",
        action=(
            f"Set num_workers={workers}{loader_line(recent.latest)}: workers load the next batches while the model "
            "computes. Loading takes "
            f"{wait / max(1.0 - wait, 0.01):.2f}× the compute time, so {count(needed, 'worker')} with 25% headroom"
            + (f", capped at {workers} by {plan.limit}" if plan.limit else "")
            + ". Add persistent_workers=True so they start once."
        ),
        source=SOURCE_BOTH if main is not None else SOURCE_PROBE,
        evidence={
            "data_wait_share": round(wait, 3),
            "steps_per_s": round(steps, 2),
            "main_thread_busy_share": main,
            "loading_cpu_share": None if load_cpu is None else round(load_cpu, 2),
            "bottleneck": bottleneck,
            "usable_cores_per_rank": cores,
            "needed_workers": needed,
        },
        suggest={"num_workers": workers},
    )


def pin_memory_off(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """A CUDA job with workers copies pageable batches while it waits for data or moves a lot to the GPU."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    latest = recent.latest
    if not (latest.on_gpu or cuda_devices(latest)) or not latest.num_workers:
        return None
    if latest.view.pin_memory.state != PIN_OFF:
        return None
    loader = latest.loader
    if loader is not None and loader.requested.pin_memory:
        return None  # asked for, and turned off by torch: this machine has no accelerator for it
    wait = steady_wait(recent)
    rx = recent.median(PCIE_RX)
    waits = wait is not None and wait >= th.DATA_WAIT_INFO
    copies = rx is not None and rx >= th.PCIE_RX_SIGNIFICANT_BYTES_PER_S
    if not (waits or copies):
        return None
    inputs = (wait, rx, latest.view.pin_memory, latest.num_workers, loader_line(latest))
    return remembered(recent, "pin-memory-off", inputs, _pin_memory_off)


def _pin_memory_off(
    wait: float | None, rx: float | None, pin_memory: PinMemoryStatus, workers: int, line: str
) -> Finding:
    """``pin-memory-off``'s finding from what it measured; ``line``: where the DataLoader was built, or empty."""
    waits = wait is not None and wait >= th.DATA_WAIT_INFO
    copies = rx is not None and rx >= th.PCIE_RX_SIGNIFICANT_BYTES_PER_S
    reasons = []
    if waits:
        reasons.append(f"the loop waits for data {pct(wait)} of each step")
    if copies:
        reasons.append(f"{fmt_bytes(rx)}/s flow from the host to the GPU")
    return Finding(
        severity=WARNING if wait is not None and wait >= th.DATA_WAIT_WARNING else INFO,
        title="pin_memory is off in a CUDA job",
        detail=f"{pin_memory.evidence}; " + " and ".join(reasons),
        action=(
            f"Set pin_memory=True in the DataLoader{line} and move batches with .to(device, non_blocking=True): pinned "
            "batches are copied by DMA at full PCIe speed while the GPU computes, where pageable ones are staged "
            "through a driver buffer and block the loop."
        ),
        source=SOURCE_BOTH if wait is not None else SOURCE_EXTERNAL,
        evidence={
            "pin_memory": pin_memory.state,
            "num_workers": workers,
            "data_wait_share": None if wait is None else round(wait, 3),
            "pcie_rx_bytes_per_s": rx,
        },
        suggest={"pin_memory": True},
    )


def persistent_workers_off(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """Workers are started anew at every epoch, and their start-up shows at the start of each epoch."""
    # The whole history, not a window: epochs can be longer than a window.
    if not w.covers(config.window_s):
        return None
    latest = w.latest
    loader = latest.loader
    if loader is None or not latest.num_workers:
        return None
    if loader.effective.persistent_workers:
        return _rebuilt_loaders(w)
    if loader.effective.persistent_workers is not False:
        return None
    starts = pass_starts(w)
    if starts is None or starts.lost_share < th.STARTUP_SHARE_INFO:
        return None
    replaced = latest.view.workers_replaced - w.samples[0].view.workers_replaced
    return Finding(
        severity=WARNING if starts.lost_share >= th.STARTUP_SHARE_WARNING else INFO,
        title=f"Workers restart every epoch: {pct(starts.lost_share)} of the time goes to starting them",
        detail=f"{count(starts.passes, 'epoch')} started in {w.span_s:.0f} s, each with new workers; the last one's "
        f"first batch came {starts.pass_start_s:.2f} s after it started, where the loop waits "
        f"{starts.batch_wait_s:.3f} s for any other batch",
        action=(
            f"Set persistent_workers=True{loader_line(latest)}"
            f": the workers then live across epochs, keeping their Dataset copy, "
            "imports and open files, instead of being started again at each one."
        ),
        source=SOURCE_BOTH if replaced else SOURCE_PROBE,
        evidence={
            "epochs": starts.passes,
            "workers_replaced": replaced,
            "span_s": round(w.span_s, 1),
            "pass_start_s": round(starts.pass_start_s, 3),
            "batch_wait_s": round(starts.batch_wait_s, 4),
            "startup_share": round(starts.lost_share, 3),
        },
        suggest={"persistent_workers": True},
    )


def _rebuilt_loaders(w: JobWindow) -> Finding | None:
    """Workers that persist across a DataLoader's epochs, replaced all the same: the job builds a new DataLoader
    (and so new workers) for each epoch. ``persistent_workers=True`` is set and cannot help; asking for it again
    would change nothing, so the finding says what does."""
    latest = w.latest
    loader = latest.loader
    replaced = latest.view.workers_replaced - w.samples[0].view.workers_replaced
    if loader is None or replaced < 1 or loader.pass_start_s is None:
        return None
    wait = w.median(DATA_WAIT_SHARE)
    steps = w.median(STEPS_PER_S)
    batch_wait = (wait or 0.0) / steps if steps else 0.0
    lost_share = min(1.0, replaced * max(0.0, loader.pass_start_s - batch_wait) / w.span_s)
    if lost_share < th.STARTUP_SHARE_INFO:
        return None
    line = loader_line(latest)
    return Finding(
        severity=WARNING if lost_share >= th.STARTUP_SHARE_WARNING else INFO,
        title=f"Workers restart although persistent_workers=True: {pct(lost_share)} of the time goes to starting them",
        detail=f"the workers were replaced {count(replaced, 'time')} in {w.span_s:.0f} s, with persistent_workers=True "
        f"in effect; the last DataLoader's first batch came {loader.pass_start_s:.2f} s after its iterator started, "
        f"where the loop waits {batch_wait:.3f} s for any other batch",
        action=(
            "persistent_workers=True keeps a DataLoader's workers across its epochs, but each epoch iterates a new "
            f"DataLoader{line}, which starts workers of its own: build it once, before the epoch loop, and iterate "
            "the same one at each epoch (set_epoch on its sampler reshuffles a DistributedSampler)."
        ),
        source=SOURCE_BOTH,
        evidence={
            "persistent_workers": True,
            "workers_replaced": replaced,
            "span_s": round(w.span_s, 1),
            "pass_start_s": round(loader.pass_start_s, 3),
            "batch_wait_s": round(batch_wait, 4),
            "startup_share": round(lost_share, 3),
        },
    )
