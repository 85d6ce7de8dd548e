"""Rules on GPU memory: room for a larger batch, a nearly full GPU, fragmentation."""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.readers import DATA_WAIT_SHARE, GPU_BUSY, GPU_MEMORY_FRACTION, SM_ACTIVITY
from gputop.advisor.rules.base import (
    Finding,
    cuda_devices,
    device_gpu,
    device_increase,
    device_values,
    last_found,
    loader_line,
    pct,
    recent_window,
    remembered,
    unallocated_shares,
)
from gputop.advisor.suggest import (
    BatchMemory,
    batch_fitting,
    batch_memory,
    larger_batch,
    memory_savings,
    smaller_batch,
)
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.breakdown import PART_NAMES, DeviceMemory, device_memory
from gputop.formatting import counted, fmt_bytes
from gputop.model import CRITICAL, INFO, SOURCE_BOTH, SOURCE_EXTERNAL, SOURCE_PROBE, WARNING, ProbeReport, Severity


def _step_start_bytes(recent: JobWindow, device: int) -> float | None:
    values = device_values(recent, device, "allocated_bytes")
    return sorted(values)[len(values) // 2] if values else None


def batch_too_small(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The GPU has memory and time to spare, and the loop is not waiting for data: a larger batch fits."""
    recent = recent_window(w, config)
    if recent is None or not recent.latest.on_gpu:
        return None
    memory = recent.median(GPU_MEMORY_FRACTION)
    busy = recent.median(GPU_BUSY)
    sm = recent.median(SM_ACTIVITY)
    if memory is None or memory >= th.BATCH_MEMORY_BELOW:
        return None
    idle_time = busy is not None and busy < th.BATCH_GPU_BUSY_BELOW
    idle_sms = sm is not None and sm < th.BATCH_SM_ACTIVITY_BELOW
    if not (idle_time or idle_sms):
        return None
    if busy is not None and busy < th.GPU_ACTIVE_FROM_PERCENT:
        return None
    wait = recent.median(DATA_WAIT_SHARE)
    if wait is not None and wait >= th.DATA_WAIT_INFO:
        return None
    latest = recent.latest
    batch = latest.batch_size
    detail = f"GPU memory {pct(memory)} used; GPU busy {'N/A' if busy is None else f'{busy:.0f}%'}"
    if sm is not None:
        detail += f", SM activity {sm:.0f}%"
    if wait is not None:
        detail += f"; the loop waits for data {pct(wait)} of each step"
    evidence: dict[str, object] = {
        "gpu_memory_used_share": round(memory, 3),
        "gpu_busy_percent": busy,
        "sm_activity_percent": sm,
        "batch_size": batch,
    }
    severity: Severity = WARNING if busy is not None and busy < th.BATCH_GPU_BUSY_WARNING else INFO
    unknown_room = False
    for device in cuda_devices(latest):
        gpu = device_gpu(latest, device)
        start = _step_start_bytes(recent, device.device)
        if gpu is None or start is None or not batch or not gpu.memory_total_bytes:
            continue
        model = batch_memory(device, gpu, batch, start)
        if model is None:
            unknown_room = True
            continue
        fits = batch_fitting(model, gpu.memory_total_bytes)
        told = _told_batch(last_found(recent, "batch-too-small"), batch)
        larger = larger_batch(fits, batch, told)
        if larger is None:
            return None
        persists = _persistent_words(latest.view.probe, device.device)
        inputs = (severity, detail, evidence, batch, larger, fits, model, gpu.memory_total_bytes, start, persists)
        return remembered(recent, "batch-too-small", (*inputs, loader_line(latest)), _larger_batch)
    if not latest.view.probe.ok:
        how = "run the job under `gputop run` (or call gputop.probe.install()) and the probe measures it"
    elif unknown_room:
        how = "neither NVML nor the probe tells how much of the GPU's memory is this process's to grow into"
    elif not batch:
        how = "the probe sees no DataLoader in this job, so the batch size is not known"
    else:
        how = "the probe reports no CUDA memory for this process"
    what = "the room the process has on the GPU" if unknown_room else "the memory per sample"
    return Finding(
        severity=severity,
        title="The GPU is under-filled: a larger batch fits",
        detail=detail,
        action=(
            f"Raise batch_size{f' (now {batch})' if batch else ''}: more samples per step give the GPU more to do "
            f"per launch. A computed size needs {what}: {how}. Scale the learning rate with it."
        ),
        source=SOURCE_EXTERNAL,
        evidence=evidence,
    )


def _told_batch(last: Finding | None, batch: int) -> int | None:
    """The batch ``batch-too-small`` last suggested to this process, while it still runs a smaller one."""
    told = _suggested(last, "batch_size")
    return told if told is not None and told > batch else None


def _larger_batch(
    severity: Severity,
    detail: str,
    evidence: dict[str, object],
    batch: int,
    larger: int,
    fits: int,
    model: BatchMemory,
    total: int,
    start: float,
    persists: str,
    line: str,
) -> Finding:
    """``batch-too-small``'s finding with a number: ``larger`` to suggest where ``fits`` fit by this window's
    memory (the two differ where the batch told before stands); ``line``: where the DataLoader was built."""
    stands = (
        ""
        if fits == larger
        else f" This window's memory gives {fits}: less than a quarter above {larger}, the measurement's noise, so "
        f"{larger} stands."
    )
    return Finding(
        severity=severity,
        title=f"The GPU is under-filled: batch_size={larger} fits",
        detail=detail,
        action=(
            f"Set batch_size={larger}{line} ({batch} now): a step starts with {fmt_bytes(start)} allocated "
            f"({persists}) and each sample adds {fmt_bytes(model.per_sample_bytes)} of activations at its peak, so "
            f"{larger} samples peak at about {pct(th.MEMORY_TARGET)} of the GPU's {fmt_bytes(total)}, beside the "
            "CUDA context and other processes' memory: 10% below where it counts as nearly full. Scale the "
            f"learning rate with the batch (linear scaling rule) and check convergence.{stands}"
        ),
        source=SOURCE_BOTH,
        evidence=evidence
        | {
            "step_start_bytes": int(start),
            "per_sample_bytes": int(model.per_sample_bytes),
            "gpu_memory_total_bytes": total,
            "budget_bytes": int(model.budget_bytes),
            "batch_fits": fits,
            "suggested_peak_bytes": int((start + larger * model.per_sample_bytes) * model.cache_factor),
        },
        suggest={"batch_size": larger},
    )


def _persistent_words(probe: ProbeReport, device: int) -> str:
    """What persists across steps on a CUDA device, part by part where the probe counted it."""
    found = next((d for d in device_memory(probe) if d.device == f"cuda:{device}"), None)
    if found is None or found.weights is None:
        return "weights, gradients, optimizer state"
    parts = [(name, getattr(found, name)) for name in ("weights", "gradients", "optimizer", "other")]
    return ", ".join(f"{PART_NAMES[name]} {fmt_bytes(size)}" for name, size in parts if size is not None)


def memory_near_full(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The GPU's memory is nearly full, or the caching allocator has had to free its cache and retry."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    latest = recent.latest
    devices = cuda_devices(latest)
    if not latest.on_gpu and not devices:
        return None
    external = recent.median(GPU_MEMORY_FRACTION)
    retries = ooms = 0.0
    peak_share = None
    for device in devices:
        retries += device_increase(recent, device.device, "num_alloc_retries")
        ooms += device_increase(recent, device.device, "num_ooms")
        gpu = device_gpu(latest, device)
        if gpu is not None and gpu.memory_total_bytes and device.reserved_peak_bytes is not None:
            peak_share = max(peak_share or 0.0, device.reserved_peak_bytes / gpu.memory_total_bytes)
    full = (peak_share is not None and peak_share >= th.MEMORY_FULL) or (
        external is not None and external >= th.MEMORY_FULL
    )
    if not (full or retries):
        return None
    severity: Severity = CRITICAL if ooms else WARNING if retries else INFO
    facts = []
    if peak_share is not None:
        facts.append(f"peak reserved {pct(peak_share)} of the GPU")
    if external is not None:
        facts.append(f"GPU memory {pct(external)} used")
    if retries:
        facts.append(f"{counted(round(retries), 'allocation retry', 'allocation retries')} in {recent.span_s:.0f} s")
    if ooms:
        facts.append(counted(round(ooms), "out-of-memory error"))
    suggest: dict[str, float | int | str | bool] = {}
    smaller_words = "a smaller batch with gradient accumulation"
    batch = latest.batch_size
    for device in devices:
        gpu = device_gpu(latest, device)
        start = _step_start_bytes(recent, device.device)
        if gpu is None or start is None or not batch or not gpu.memory_total_bytes:
            continue
        model = batch_memory(device, gpu, batch, start)
        told = _told_plan(last_found(recent, "memory-near-full"), batch)
        plan = smaller_batch(model, gpu.memory_total_bytes, batch, told) if model is not None else None
        if plan is not None:
            suggest = {"batch_size": plan[0], "gradient_accumulation_steps": plan[1]}
            smaller_words = (
                f"batch_size={plan[0]}{loader_line(latest)} with gradient accumulation over {plan[1]} steps (the "
                "same effective batch, "
                f"peak about {pct(th.MEMORY_TARGET)} of the GPU)"
            )
    evidence: dict[str, object] = {
        "peak_reserved_share": None if peak_share is None else round(peak_share, 3),
        "gpu_memory_used_share": None if external is None else round(external, 3),
        "alloc_retries": int(retries),
        "ooms": int(ooms),
        "batch_size": batch,
    }
    action = (
        "Make room before an out-of-memory error: mixed precision (torch.autocast with bfloat16) halves "
        "activations, activation checkpointing (torch.utils.checkpoint) recomputes them instead of keeping "
        f"them, or {smaller_words}."
    )
    largest = max(device_memory(latest.view.probe), key=lambda d: d.total, default=None)
    if largest is not None and largest.largest() is not None:
        planned = bool(suggest)
        action, more = _shrink_largest_part(largest, latest.view.probe, batch, suggest)
        if planned:
            action += f" Or, to fit at once: {smaller_words}."
        evidence |= more
    found = Finding(
        severity=severity,
        title="GPU memory is nearly full" + (": allocations are retrying" if retries else ""),
        detail="; ".join(facts),
        action=action,
        source=SOURCE_BOTH if devices and external is not None else SOURCE_PROBE if devices else SOURCE_EXTERNAL,
        evidence=evidence,
        suggest=suggest,
    )
    return remembered(recent, "memory-near-full", (found,), _as_found)


def _as_found(found: Finding) -> Finding:
    """``memory-near-full``'s finding, made before it is remembered (``last_found`` then gives its plan)."""
    return found


def _told_plan(last: Finding | None, batch: int) -> tuple[int, int] | None:
    """The smaller batch and accumulation steps ``memory-near-full`` last suggested to this process, while it still
    runs a larger batch."""
    size, steps = _suggested(last, "batch_size"), _suggested(last, "gradient_accumulation_steps")
    return (size, steps) if size is not None and steps is not None and size < batch else None


def _suggested(found: Finding | None, setting: str) -> int | None:
    """The whole number ``found`` suggests for ``setting``, if it suggests one."""
    value = None if found is None else found.suggest.get(setting)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shrink_largest_part(
    device: DeviceMemory, probe: ProbeReport, batch: int | None, suggest: dict[str, float | int | str | bool]
) -> tuple[str, dict[str, object]]:
    """The action that names the part holding the most of ``device``'s memory and the changes that shrink it,
    with the bytes each saves where they can be counted; fills ``suggest`` from the first change that has
    settings when it is still empty. Returns the action and its evidence."""
    part, size = device.largest() or ("", 0)
    share = size / device.total
    savings = memory_savings(device, probe, batch)
    changes = "; ".join(
        s.words + (f" (saves about {fmt_bytes(s.saves_bytes)})" if s.saves_bytes else "") for s in savings
    )
    if not suggest:
        suggest.update(next((dict(s.suggest) for s in savings if s.suggest), {}))
    where = device.device if device.gpu_index is None else f"GPU {device.gpu_index}"
    action = (
        f"The largest part of this process's {fmt_bytes(device.total)} on {where} is {PART_NAMES[part]}: "
        f"{fmt_bytes(size)}, {pct(share)}. To shrink it: {changes}."
    )
    evidence: dict[str, object] = {f"{name}_bytes": value for name, value in device.parts() if value is not None}
    evidence["largest_part"] = part
    best = max((s.saves_bytes for s in savings if s.saves_bytes), default=None)
    if best is not None:
        evidence["saves_bytes"] = best
    return action, evidence


def fragmentation(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """Much reserved memory is unallocated while allocations retry: the free memory is in pieces too small."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    for device in cuda_devices(recent.latest):
        retries = device_increase(recent, device.device, "num_alloc_retries")
        shares = unallocated_shares(recent, device.device)
        if not shares or not retries:
            continue
        share = sorted(shares)[len(shares) // 2]
        if share <= th.FRAGMENTED_SHARE:
            continue
        return Finding(
            severity=WARNING,
            title=f"GPU memory is fragmented: {pct(share)} of reserved memory unused while allocations retry",
            detail=f"cuda:{device.device}: reserved {fmt_bytes(device.reserved_bytes)}, allocated "
            f"{fmt_bytes(device.allocated_bytes)}; {retries:.0f} allocation retries in {recent.span_s:.0f} s",
            action=(
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the job's environment: segments then grow "
                "in place instead of leaving gaps between them. Each retry frees the whole cache and synchronises "
                "the GPU."
            ),
            source=SOURCE_PROBE,
            evidence={
                "device": device.device,
                "unallocated_reserved_share": round(share, 3),
                "reserved_bytes": device.reserved_bytes,
                "allocated_bytes": device.allocated_bytes,
                "inactive_split_bytes": device.inactive_split_bytes,
                "alloc_retries": int(retries),
            },
            suggest={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        )
    return None
