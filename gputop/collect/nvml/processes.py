"""The processes on one GPU: NVML's process lists and per-process utilization samples.

The running-process calls are tried newest first, ``_v3`` → ``_v2`` → the legacy v1 symbol (v1 structs have no
MIG ids), and the one the driver answered is remembered. The rows carry the GPU side only (``host`` is None):
the sampler joins the host side.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

from gputop.collect.nvml.errors import (
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_NOT_FOUND,
    NVML_SUCCESS,
    call,
    nvml_code,
)
from gputop.collect.nvml.slot import GpuSlot, Variants
from gputop.model import (
    COMPUTE,
    COMPUTE_GRAPHICS,
    GRAPHICS,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    NOT_REPORTED,
    GpuProcess,
    ProcessKind,
    frozen_reasons,
)

try:
    import pynvml
except ImportError:
    pynvml = None

NVML_VALUE_NOT_AVAILABLE = 2**64 - 1
"""What a v1 struct's ``usedGpuMemory`` holds when the driver cannot tell (nvml.h, unsigned long long)."""
LATEST_VARIANTS = (3, 2, 1)


class _V1ProcessInfo(ctypes.Structure):
    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


def running(
    slot: GpuSlot, variants: Variants, kind: ProcessKind
) -> tuple[list[tuple[int, int | None]] | None, str | None]:
    """(pid, used memory) pairs of one kind, from the newest process call the driver exports."""
    base = "nvmlDeviceGetComputeRunningProcesses" if kind == COMPUTE else "nvmlDeviceGetGraphicsRunningProcesses"
    known = variants.processes.get(kind)
    why: str | None = NOT_IN_DRIVER
    for variant in LATEST_VARIANTS if known is None else (known,):
        if variant == 1:
            fn: Callable[..., Any] | None = lambda h, base=base: _running_v1(base, h)  # noqa: E731
        else:
            fn = getattr(pynvml, f"{base}_v{variant}", None)
        if fn is None:
            continue
        found, why = call(slot.unsupported, f"{base}_v{variant}", fn, slot.handle)
        if found is not None:
            variants.processes[kind] = variant
            return [(int(p.pid), reported(p.usedGpuMemory)) for p in found], None
        if why != NOT_IN_DRIVER:
            break
    return None, why


def reported(used: int | None) -> int | None:
    """A process's used memory, or None where the driver marks it not available (WDDM, some containers, vGPU).

    pynvml turns NVML_VALUE_NOT_AVAILABLE into None in its v2/v3 wrappers; older pynvml releases did not.
    """
    return None if used is None or int(used) == NVML_VALUE_NOT_AVAILABLE else int(used)


def _running_v1(base: str, handle: Any) -> list[_V1ProcessInfo]:
    """The legacy unversioned call (v1 struct), which pynvml no longer wraps."""
    fn = pynvml._nvmlGetFunctionPointer(base)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == NVML_SUCCESS:
        return []
    if ret != NVML_ERROR_INSUFFICIENT_SIZE:  # the expected answer to a sizing call
        raise pynvml.NVMLError(ret)
    count.value = count.value * 2 + 5
    infos = (_V1ProcessInfo * count.value)()
    ret = fn(handle, ctypes.byref(count), infos)
    if ret != NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    # usedGpuMemory stays NVML_VALUE_NOT_AVAILABLE where the driver has no figure (``reported`` reads it): a
    # ctypes integer field cannot hold None, and assigning it raised, losing every process of the GPU.
    return list(infos[: count.value])


def read_processes(slot: GpuSlot, variants: Variants, sample_stale_s: float) -> list[GpuProcess]:
    """One row per process on the GPU, compute and graphics merged, with its utilization when sampled lately."""
    compute, compute_why = running(slot, variants, COMPUTE)
    graphics, _ = running(slot, variants, GRAPHICS)
    slot.process_notice = (
        f"GPU {slot.index}: no permission to list its processes (run as root to see them)"
        if compute is None and compute_why == NO_PERMISSION
        else None
    )
    slot.process_reason = compute_why if compute is None else None
    slot.processes_per_instance = False
    listed: dict[ProcessKind, list[tuple[int, int | None]]] = {COMPUTE: compute or [], GRAPHICS: graphics or []}
    kinds: dict[int, ProcessKind] = {}
    memory: dict[int, int | None] = {}
    for found_kind, found in listed.items():
        for pid, used in found:
            kinds[pid] = COMPUTE_GRAPHICS if kinds.get(pid, found_kind) != found_kind else found_kind
            if used is not None:
                memory[pid] = max(memory.get(pid) or 0, int(used))
            else:
                memory.setdefault(pid, None)
    samples, sample_why = read_samples(slot, sample_stale_s)
    result = []
    for pid in sorted(kinds):
        reasons: dict[str, str] = {}
        if memory[pid] is None:
            reasons["gpu_memory_bytes"] = NOT_REPORTED
        sample = samples.get(pid)
        if sample is None:
            reasons["sm_percent"] = reasons["memory_bandwidth_percent"] = sample_why or "no recent sample"
        result.append(
            GpuProcess(
                pid=pid,
                gpu_index=slot.index,
                kind=kinds[pid],
                gpu_memory_bytes=memory[pid],
                sm_percent=None if sample is None else sample[1],
                memory_bandwidth_percent=None if sample is None else sample[2],
                unavailable=frozen_reasons(reasons),
            )
        )
    return result


def _samples_since(handle: Any, since_us: int) -> Any:
    try:
        return pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except Exception as exc:
        if nvml_code(exc) == NVML_ERROR_NOT_FOUND:
            return []  # no samples newer than the last one: nothing ran since, not an error
        raise


def read_samples(slot: GpuSlot, sample_stale_s: float) -> tuple[dict[int, tuple[int, float, float]], str | None]:
    """Per-process SM and memory-bandwidth use, asking only for samples newer than the last one seen."""
    fresh, why = call(slot.unsupported, "process_utilization", _samples_since, slot.handle, slot.last_sample_us)
    if fresh is None:
        return {}, why
    grouped: dict[int, list[Any]] = {}
    for sample in fresh:
        grouped.setdefault(int(sample.pid), []).append(sample)
        slot.last_sample_us = max(slot.last_sample_us, int(sample.timeStamp))
    for pid, group in grouped.items():
        slot.process_samples[pid] = (
            max(int(s.timeStamp) for s in group),
            round(sum(float(s.smUtil) for s in group) / len(group), 1),
            round(sum(float(s.memUtil) for s in group) / len(group), 1),
        )
    oldest_us = int((time.time() - sample_stale_s) * 1_000_000)
    slot.process_samples = {pid: s for pid, s in slot.process_samples.items() if s[0] >= oldest_us}
    return slot.process_samples, None
