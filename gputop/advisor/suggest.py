"""The numbers the advisor suggests, computed from what it measured: worker counts and batch sizes.

Each function is pure and small, so a suggestion can be checked by hand against docs/advisor.md.
"""

from __future__ import annotations

import math

from gputop.advisor import thresholds as th
from gputop.advisor.loop import WorkerActivity
from gputop.advisor.samples import JobSample
from gputop.breakdown import DeviceMemory
from gputop.frozen import immutable
from gputop.model import CudaMemory, Gpu, ProbeReport

CPU = "cpu"
IO = "io"
STORAGE = "storage"


def cores_per_rank(sample: JobSample) -> int:
    """CPUs one training process of the job may count on for itself and its workers.

    Ranks pinned to disjoint CPUs each have their own mask; ranks that share one mask share its CPUs.
    """
    usable = sample.view.usable_cpu_count or sample.host.usable_cpu_count
    ranks = sample.local_ranks
    if ranks > 1 and usable * ranks > sample.host.cpu_count:
        usable //= ranks
    return max(1, usable)


def workers_needed(producers: int, wait_share: float, in_main_process: bool) -> int:
    """Workers that keep up with the loop, from the share of each step it waits for data.

    A step of T seconds waits ``wait_share`` × T and computes the rest, C. Starved workers each take
    ``producers`` × T per batch, so keeping up takes ``producers`` × T / C of them. With ``num_workers=0`` the
    main process loads each batch itself, in ``wait_share`` × T, and the workers to take that over are
    ``wait_share`` × T / C. Both get ``WORKER_MARGIN`` on top.
    """
    compute_share = max(1.0 - wait_share, 0.01)
    batch_time = wait_share if in_main_process else producers  # in steps of T
    # Rounding off: 0.8 / 0.2 is 4.000000000000001 in floating point, which must not become a fifth worker.
    return max(1, math.ceil(round(batch_time / compute_share * th.WORKER_MARGIN, 6)))


def loop_work_s(wait_share: float, steps_per_s: float) -> float:
    """C, the loop's own work per step: the part of a step it does not wait for data (1 − w) over the steps a
    second (at least 1 % of the step, so that a loop that waits all the time still has a C)."""
    return max(1.0 - wait_share, 0.01) / steps_per_s


def workers_keeping_up(batch_s: float, wait_share: float, steps_per_s: float) -> float:
    """Workers that exactly keep up with the loop, from what one spends on a batch (measured in the worker):
    the loop takes a batch every C = (1 − w) / steps_per_s seconds of its own work, so B / C workers deliver one
    that often. Unlike ``workers_needed`` it does not assume that the workers are the wait: run at this count
    (with headroom), it gives the same count again."""
    compute_s = loop_work_s(wait_share, steps_per_s)
    return batch_s / compute_s


def prefetch_needed(slow_s: float, workers: int, wait_share: float, steps_per_s: float) -> int:
    """The ``prefetch_factor`` whose queue covers the slow batches: batches come back in the order asked, and each
    is asked for ``prefetch_factor`` × workers batches before the loop needs it, that many times C, the loop's own
    work per step, ahead; a batch that takes S (``worker_batch_p95_s``, timed in the worker) is there in time when
    ``prefetch_factor`` ≥ S / (workers × C). That with ``WORKER_MARGIN`` headroom, as the workers' count: a slow
    batch can start behind the batches already queued to its worker, and C, timed on the host's clock, moves by
    more than a quarter between two runs on a busy host (one CI run told 3 at 2, then 4 at 3). S and C do not change
    with the queue's depth, so at the value this gives, it gives the same value again."""
    compute_s = loop_work_s(wait_share, steps_per_s)
    return max(1, math.ceil(round(slow_s * th.WORKER_MARGIN / (max(1, workers) * compute_s), 6)))


def with_headroom(workers: float) -> int:
    """``WORKER_MARGIN`` on a count, rounded up (0.8 / 0.2 is 4.000000000000001 in floating point, which must not
    become a fifth worker)."""
    return max(1, math.ceil(round(workers * th.WORKER_MARGIN, 6)))


@immutable
class WorkerPlan:
    """How many workers to run: ``needed`` from the measurements, ``suggested`` after the caps that apply, or
    None when more workers cannot help; ``limit`` names the cap that bound it."""

    bottleneck: str
    needed: int
    suggested: int | None
    limit: str | None = None


JOB_CORES = "the job's own processes"
"""The cap of a job whose own processes already use its cores (``JOB_CPU_SPENT``)."""


def plan_workers(
    current: int,
    needed: int,
    bottleneck: str,
    cores: int,
    uss_per_worker: float | None,
    available_bytes: int,
    job_cores: float | None = None,
    main_cores: float | None = None,
    others_cores: float = 0.0,
) -> WorkerPlan:
    """Cap the needed workers by what the machine offers.

    CPU-bound workers get the cores of their rank less what the main process uses (``main_cores``, measured;
    rounded, so a main process that mostly waits leaves its core to them) and what other processes hold of them
    (``others_cores``), or less one where the main process's use is not known;
    workers waiting on I/O may
    outnumber the cores up to ``IO_WORKERS_PER_CORE`` each, unless the job's own processes already use its cores
    (``job_cores``, in cores); new workers may take at most ``WORKER_MEMORY_SHARE`` of the available host memory.
    Workers waiting on the storage itself are not helped by more of their kind.
    """
    if bottleneck == STORAGE:
        return WorkerPlan(bottleneck, needed, None, "the storage")
    if bottleneck == IO and job_cores is not None and job_cores >= th.JOB_CPU_SPENT * cores:
        return WorkerPlan(bottleneck, needed, None, JOB_CORES)
    caps: list[tuple[int, str]] = []
    if bottleneck == CPU:
        if main_cores is None:
            caps.append((max(1, cores - 1), f"{cores} usable cores, one kept for the main process"))
        else:
            free = max(1, round(cores - main_cores - others_cores))
            others = f" and other processes' {others_cores:.1f}" if others_cores else ""
            caps.append((free, f"{cores} usable cores less the main process's {main_cores:.1f}{others}"))
    else:
        caps.append((cores * th.IO_WORKERS_PER_CORE, f"{th.IO_WORKERS_PER_CORE} workers per usable core"))
    if uss_per_worker:
        room = int(available_bytes * th.WORKER_MEMORY_SHARE / uss_per_worker)
        caps.append((current + room, "half the available host memory"))
    cap, why = min(caps)
    if needed <= cap:
        return WorkerPlan(bottleneck, needed, needed if needed > current else None)
    return WorkerPlan(bottleneck, needed, cap if cap > current else None, why)


@immutable
class BatchMemory:
    """A step's memory as a function of its batch size: what PyTorch holds at the start of a step (weights,
    gradients, optimizer state), plus ``per_sample_bytes`` for each sample at the step's peak.

    ``budget_bytes`` is what PyTorch may reserve on the GPU: its total, less the CUDA context (NVML's figure for
    the process less what PyTorch reserved) and the memory of other processes. ``cache_factor`` is the caching
    allocator's peak reserved over its peak allocated, by which every allocation is scaled up.
    """

    step_start_bytes: float
    per_sample_bytes: float
    budget_bytes: float
    cache_factor: float

    def batch_within(self, share: float, total_bytes: int) -> int:
        """The largest batch whose peak stays within ``share`` of the GPU's memory."""
        room = (self.budget_bytes - (1.0 - share) * total_bytes) / self.cache_factor - self.step_start_bytes
        return max(0, math.floor(room / self.per_sample_bytes))


def batch_memory(device: CudaMemory, gpu: Gpu, batch_size: int, step_start_bytes: float) -> BatchMemory | None:
    """The memory model of a step, or None when the probe's figures do not make one.

    The peak is the allocator's all-time peak: a step's own peak is no higher, so the per-sample cost it gives
    errs large and the batch computed from it errs small. What the process cannot grow into is the CUDA context
    and the other processes' memory: from NVML's figure for the process where NVML lists it, else everything
    used on the GPU but what PyTorch reserved (NVML lists no process inside a container that does not share the
    host's PIDs). Without either, the room is not known, and no batch is computed: one computed over the whole
    GPU would not fit beside what others hold.
    """
    total, peak = gpu.memory_total_bytes, device.allocated_peak_bytes
    if not total or not peak or batch_size <= 0 or peak <= step_start_bytes:
        return None
    used, reserved = gpu.memory_used_bytes, device.reserved_bytes
    if reserved is None or used is None:
        return None
    if device.nvml_process_bytes is not None:
        held = max(0, device.nvml_process_bytes - reserved) + max(0, used - device.nvml_process_bytes)
    else:
        held = max(0, used - reserved)
    cache_factor = max(1.0, (device.reserved_peak_bytes or peak) / peak)
    return BatchMemory(
        step_start_bytes=step_start_bytes,
        per_sample_bytes=(peak - step_start_bytes) / batch_size,
        budget_bytes=total - held,
        cache_factor=cache_factor,
    )


def round_batch(batch: int) -> int:
    """Round a batch down to a multiple of ``BATCH_MULTIPLE`` where it is large enough to keep one."""
    return batch - batch % th.BATCH_MULTIPLE if batch >= 2 * th.BATCH_MULTIPLE else batch


def batch_fitting(memory: BatchMemory, total_bytes: int) -> int:
    """The largest batch whose peak stays at ``MEMORY_TARGET`` of the GPU, rounded down (``round_batch``)."""
    return round_batch(memory.batch_within(th.MEMORY_TARGET, total_bytes))


def larger_batch(fits: int, current: int, told: int | None = None) -> int | None:
    """The batch to suggest where ``fits`` fit (``batch_fitting``) and ``current`` run, if it is worth the change.

    ``told``, the batch already suggested to the process, stands while it still fits and ``fits`` is less than
    ``BATCH_NOISE`` above it; a smaller ``fits`` replaces it at once (a value that does not fit is never given).
    At the batch suggested, the same measurement is silent unless it leaves room ``BATCH_NOISE`` beyond it.
    """
    if told is not None and current < told <= fits < told * (1 + th.BATCH_NOISE):
        return told
    return fits if fits >= current * (1 + th.BATCH_NOISE) else None


def smaller_batch(
    memory: BatchMemory, total_bytes: int, current: int, told: tuple[int, int] | None = None
) -> tuple[int, int] | None:
    """A batch that brings the peak down to ``MEMORY_TARGET`` and the gradient accumulation steps that keep the
    effective batch, or None when the current batch already fits or no batch would.

    The fewest accumulation steps that fit, with the current batch split evenly over them: 64 samples where 41
    fit are two steps of 32. ``told``, the plan already suggested to the process, stands while its batch still
    fits: room that grows back by a few samples does not bring back the larger batch it replaced.
    """
    fits = memory.batch_within(th.MEMORY_TARGET, total_bytes)
    if fits >= current or fits < 1:
        return None
    if told is not None and told[0] <= fits:
        return told
    steps = math.ceil(current / fits)
    return math.ceil(current / steps), steps


def worker_bottleneck(activity: WorkerActivity) -> str:
    """CPU-bound, waiting on the storage, or waiting on other I/O (a network, a sleep, a remote store).

    Workers are CPU-bound when each uses half a core or more, measured from their CPU time; or when they are
    runnable in half their readings, unless the host had CPUs to spare (then a runnable worker would have run,
    and its CPU time, under half a core, says what the readings, a few point samples, only guessed)."""
    per_worker = activity.cpu_cores / activity.count if activity.cpu_cores is not None and activity.count else None
    if per_worker is not None and per_worker >= th.WORKER_BUSY_SHARE:
        return CPU
    host = activity.host_cpu_percent
    room = per_worker is not None and host is not None and host < th.HOST_CPU_SATURATED_PERCENT
    if activity.busy_share >= th.WORKER_BUSY_SHARE and not room:
        return CPU
    if activity.disk_share >= th.WORKER_DISK_SHARE:
        return STORAGE
    return IO


@immutable
class Saving:
    """A change that shrinks one memory part: in words, the bytes it saves where they can be computed, and the
    settings it suggests."""

    part: str
    words: str
    saves_bytes: int | None = None
    suggest: tuple[tuple[str, float | int | str | bool], ...] = ()


def memory_savings(device: DeviceMemory, probe: ProbeReport, batch_size: int | None) -> list[Saving]:
    """The changes that shrink ``device``'s largest part, the most certain first (docs/memory.md).

    Counted bytes come from the probe's figures: an 8-bit optimizer keeps Adam's two moments in 1 byte each
    instead of 4; sharding over N ranks keeps 1/N of a part on each; bf16 halves a float32 part; half the batch
    with two accumulation steps halves the activations.
    """
    largest = device.largest()
    if largest is None:
        return []
    part, size = largest
    ranks = probe.world_size if probe.world_size and probe.world_size > 1 else None
    all_fp32 = bool(device.weight_dtypes) and all(name == "float32" for name, _ in device.weight_dtypes)
    savings: list[Saving] = []
    if part == "optimizer":
        if any("Adam" in name for name in probe.optimizers):
            savings.append(
                Saving(
                    part,
                    "an 8-bit optimizer (bitsandbytes.optim.AdamW8bit) keeps both moments in 1 byte each instead of 4",
                    size * 3 // 4 if all_fp32 else None,
                )
            )
        savings.append(_shard(part, size, ranks, "the optimizer state", "ZeRO-1: ZeroRedundancyOptimizer, or FSDP"))
        savings.append(
            Saving(
                part, "a fused optimizer (fused=True) avoids the foreach implementation's temporary copies at each step"
            )
        )
    elif part == "activations":
        savings.append(
            Saving(
                part,
                "activation checkpointing (torch.utils.checkpoint around each block) keeps "
                "only the blocks' inputs and recomputes the rest in the backward pass",
            )
        )
        if probe.autocast is False and all_fp32:
            savings.append(
                Saving(
                    part,
                    "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)) halves the float32 activations",
                    size // 2,
                )
            )
        if batch_size and batch_size >= 2:
            half = batch_size // 2
            savings.append(
                Saving(
                    part,
                    f"batch_size={half} with 2 gradient accumulation steps keeps the effective batch",
                    size - size * half // batch_size,
                    (("batch_size", half), ("gradient_accumulation_steps", 2)),
                )
            )
    elif part == "cache":
        savings.append(
            Saving(
                part,
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place instead of "
                "keeping freed blocks that fit nothing",
                None,
                (("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),),
            )
        )
    elif part == "outside":
        savings.append(
            Saving(
                part,
                "outside PyTorch are the CUDA context, cuBLAS and cuDNN workspaces and, in a "
                "distributed job, NCCL's buffers: a smaller NCCL_BUFFSIZE or fewer NCCL channels "
                "shrink the last",
            )
        )
    elif part in ("weights", "gradients"):
        both = (device.weights or 0) + (device.gradients or 0)
        if all_fp32:
            savings.append(
                Saving(
                    part,
                    "bf16 weights and gradients, with float32 optimizer state (master weights) halve both",
                    both // 2,
                )
            )
        savings.append(_shard(part, both, ranks, "the weights and gradients", "FSDP"))
    return savings


def _shard(part: str, size: int, ranks: int | None, what: str, how: str) -> Saving:
    """Sharding a part over the job's ranks: each GPU keeps 1/N of it."""
    if ranks is None:
        return Saving(part, f"sharding {what} over N ranks ({how}) keeps 1/N of it on each GPU")
    words = f"sharding {what} over the job's {ranks} ranks ({how}) keeps 1/{ranks} of it on each GPU"
    return Saving(part, words, size - size // ranks)
