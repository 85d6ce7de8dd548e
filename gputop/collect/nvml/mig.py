"""MIG: a GPU partitioned into instances. Its mode, its instances, the processes on each, and GPM per instance.

What NVML gives on a GPU in MIG mode, and what this module does with it:

- ``nvmlDeviceGetMigMode`` says whether the GPU is partitioned (and what it will be after a reset).
- Instances are found by slot: ``nvmlDeviceGetMaxMigDeviceCount`` slots, each asked with
  ``nvmlDeviceGetMigDeviceHandleByIndex``; an empty slot answers NOT_FOUND (or INVALID_ARGUMENT) and is skipped.
  On each MIG handle: ``nvmlDeviceGetGpuInstanceId``, ``nvmlDeviceGetComputeInstanceId``, ``nvmlDeviceGetName``
  (``NVIDIA A100-SXM4-40GB MIG 3g.20gb``: the profile is its last word), ``nvmlDeviceGetUUID`` (``MIG-…``),
  ``nvmlDeviceGetAttributes_v2`` (SM count) once per slow tick, and ``nvmlDeviceGetMemoryInfo`` every tick.
- Processes: the parent's own list holds every instance's processes only for a privileged caller; others get an
  empty list or NO_PERMISSION. So the parent's list is asked first and, when it is empty or refused, each
  instance's list on its own handle. A row's instance comes from the ``gpuInstanceId``/``computeInstanceId`` of
  the v2/v3 structs, or from the handle that listed it.
- NVML has no utilization in MIG mode (GPU, memory controller, per process: NOT_SUPPORTED), so those read N/A
  with ``NOT_IN_MIG_MODE``; SM and tensor activity per instance come from GPM (``nvmlGpmMigSampleGet``, Hopper
  and newer) between this tick's sample and the previous one.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from gputop.collect.nvml.errors import GONE, NVML_SUCCESS, GpuLost, call, lost_reason, nvml_code, text
from gputop.collect.nvml.gpm import FIELDS as GPM_FIELDS
from gputop.collect.nvml.gpm import free, supported
from gputop.collect.nvml.processes import reported, running
from gputop.collect.nvml.slot import GpuSlot, Put, Variants
from gputop.model import (
    COMPUTE,
    COMPUTE_GRAPHICS,
    GRAPHICS,
    INVALID,
    MEASURING,
    MIG_DISABLED,
    MIG_ENABLED,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    NOT_IN_MIG_MODE,
    NOT_REPORTED,
    UNSUPPORTED,
    GpuProcess,
    MigInstance,
    MigMode,
    ProcessKind,
    frozen_reasons,
)

try:
    import pynvml
except ImportError:
    pynvml = None

NVML_DEVICE_MIG_ENABLE = 1
NO_INSTANCE = 0xFFFFFFFF
"""The instance id of a process struct off MIG."""
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
ACTIVITY = (
    ("sm_activity_percent", NVML_GPM_METRIC_SM_UTIL),
    ("tensor_activity_percent", NVML_GPM_METRIC_ANY_TENSOR_UTIL),
)
NO_UTILIZATION = ("utilization_gpu_percent", "utilization_memory_percent", *GPM_FIELDS)
"""The GPU's own readings that NVML does not give in MIG mode."""


@dataclass
class MigSlot:
    """One MIG instance between ticks: its handle, its fixed facts, its last GPM sample."""

    index: int
    handle: Any
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    profile: str | None = None
    uuid: str | None = None
    multiprocessor_count: int | None = None
    reasons: dict[str, str] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    gpm_sample: Any = None


def profile_of(name: str | None) -> str | None:
    """``3g.40gb`` from a MIG device's name, ``NVIDIA A100-SXM4-40GB MIG 3g.40gb`` (or the name itself)."""
    if not name:
        return None
    _, mig, profile = name.rpartition("MIG ")
    return profile.strip() or None if mig else name.strip() or None


def read_mode(slot: GpuSlot, put: Put) -> bool:
    """``mig_mode`` and ``mig_pending_mode``; whether the GPU is in MIG mode now."""
    if not hasattr(pynvml, "nvmlDeviceGetMigMode"):
        put("mig_mode", None, NOT_IN_DRIVER)
        put("mig_pending_mode", None, NOT_IN_DRIVER)
        return False
    modes, why = call(slot.unsupported, "mig_mode", pynvml.nvmlDeviceGetMigMode, slot.handle)
    current: MigMode | None = None
    pending: MigMode | None = None
    if modes is not None:
        current = MIG_ENABLED if modes[0] == NVML_DEVICE_MIG_ENABLE else MIG_DISABLED
        pending = MIG_ENABLED if modes[1] == NVML_DEVICE_MIG_ENABLE else MIG_DISABLED
    put("mig_mode", current, why)
    put("mig_pending_mode", pending, why)
    enabled = current == MIG_ENABLED
    if not enabled:
        drop(slot)
    return enabled


def find_instances(slot: GpuSlot) -> None:
    """Every MIG device of the GPU, by slot, with the facts that stay while it exists (slow cadence: instances are
    created and destroyed while the driver runs, and a handle may then be reused for another)."""
    count, _ = call(slot.unsupported, "mig_count", pynvml.nvmlDeviceGetMaxMigDeviceCount, slot.handle)
    previous = {m.index: m for m in slot.mig_slots}
    found: list[MigSlot] = []
    for index in range(int(count or 0)):
        try:
            handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(slot.handle, index)
        except Exception as exc:
            if nvml_code(exc) in GONE:
                raise GpuLost(*lost_reason(exc)) from exc
            continue  # an empty slot; any other failure leaves the slot out until the next look
        mig = MigSlot(index=index, handle=handle)
        _identify(mig)
        before = previous.pop(index, None)
        if before is not None and (before.gpu_instance_id, before.uuid) == (mig.gpu_instance_id, mig.uuid):
            mig.gpm_sample, mig.unsupported = before.gpm_sample, before.unsupported
        elif before is not None:
            _drop_sample(before)
        found.append(mig)
    for gone in previous.values():
        _drop_sample(gone)
    slot.mig_slots = found


def _identify(mig: MigSlot) -> None:
    h, reasons = mig.handle, mig.reasons
    gi, why = call(mig.unsupported, "gi", pynvml.nvmlDeviceGetGpuInstanceId, h)
    mig.gpu_instance_id = None if gi is None else int(gi)
    if why:
        reasons["gpu_instance_id"] = why
    ci, why = call(mig.unsupported, "ci", pynvml.nvmlDeviceGetComputeInstanceId, h)
    mig.compute_instance_id = None if ci is None else int(ci)
    if why:
        reasons["compute_instance_id"] = why
    name, why = call(mig.unsupported, "name", pynvml.nvmlDeviceGetName, h)
    mig.profile = profile_of(_text(name))
    if mig.profile is None:
        reasons["profile"] = why or INVALID
    uuid, why = call(mig.unsupported, "uuid", pynvml.nvmlDeviceGetUUID, h)
    mig.uuid = _text(uuid)
    if why:
        reasons["uuid"] = why
    attributes, why = call(mig.unsupported, "attributes", pynvml.nvmlDeviceGetAttributes_v2, h)
    mig.multiprocessor_count = None if attributes is None else int(attributes.multiprocessorCount)
    if why:
        reasons["multiprocessor_count"] = why


def _text(value: Any) -> str | None:
    return None if value is None else text(value)


def read_instances(slot: GpuSlot, variants: Variants) -> tuple[MigInstance, ...]:
    """Each instance at this tick: its facts, its memory and its GPM activity."""
    gpm_ok = _gpm_ready(slot)
    instances = []
    for mig in slot.mig_slots:
        reasons = dict(mig.reasons)
        total, used, why = _memory(mig, variants)
        if why:
            reasons["memory_total_bytes"] = reasons["memory_used_bytes"] = why
        activity = _activity(slot, mig, gpm_ok)
        for name, (_, activity_why) in activity.items():
            if activity_why:
                reasons[name] = activity_why
        instances.append(
            MigInstance(
                index=mig.index,
                gpu_instance_id=mig.gpu_instance_id,
                compute_instance_id=mig.compute_instance_id,
                profile=mig.profile,
                uuid=mig.uuid,
                multiprocessor_count=mig.multiprocessor_count,
                memory_total_bytes=total,
                memory_used_bytes=used,
                sm_activity_percent=activity["sm_activity_percent"][0],
                tensor_activity_percent=activity["tensor_activity_percent"][0],
                unavailable=frozen_reasons(reasons),
            )
        )
    return tuple(instances)


def _memory(mig: MigSlot, variants: Variants) -> tuple[int | None, int | None, str | None]:
    """Its memory: ``_v2`` where the driver has it (``used`` without the reserved part), else v1."""
    get = pynvml.nvmlDeviceGetMemoryInfo
    if variants.memory_v2:
        info, why = call(mig.unsupported, "memory_v2", get, mig.handle, pynvml.nvmlMemory_v2)
        if info is not None:
            return int(info.total), int(info.used), None
    info, why = call(mig.unsupported, "memory", get, mig.handle)
    return (None, None, why) if info is None else (int(info.total), int(info.used), None)


def _gpm_ready(slot: GpuSlot) -> bool:
    if slot.gpm_supported is None:
        slot.gpm_supported = supported(slot)
    return bool(slot.gpm_supported)


def _activity(slot: GpuSlot, mig: MigSlot, gpm_ok: bool) -> dict[str, tuple[float | None, str | None]]:
    """SM and tensor activity of the instance's GPU instance since the previous tick, from GPM."""

    def none(why: str | None) -> dict[str, tuple[float | None, str | None]]:
        return {name: (None, why) for name, _ in ACTIVITY}

    if not gpm_ok:
        return none(slot.unsupported.get("gpm", UNSUPPORTED))
    if mig.gpu_instance_id is None:
        return none(mig.reasons.get("gpu_instance_id", UNSUPPORTED))
    if not hasattr(pynvml, "nvmlGpmMigSampleGet"):
        return none(NOT_IN_DRIVER)
    try:
        sample = pynvml.nvmlGpmSampleAlloc()
    except Exception:
        return none(UNSUPPORTED)
    _taken, why = call(
        slot.unsupported, "gpm_mig_sample", pynvml.nvmlGpmMigSampleGet, slot.handle, mig.gpu_instance_id, sample
    )
    if why is not None:
        free(sample)
        return none(why)
    previous, mig.gpm_sample = mig.gpm_sample, sample
    if previous is None:
        return none(MEASURING)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(ACTIVITY)
    request.sample1 = previous
    request.sample2 = sample
    for i, (_, metric) in enumerate(ACTIVITY):
        request.metrics[i].metricId = metric
    result, why = call(mig.unsupported, "gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
    free(previous)
    if result is None:
        return none(why)
    out: dict[str, tuple[float | None, str | None]] = {}
    for i, (name, _) in enumerate(ACTIVITY):
        metric = result.metrics[i]
        value = float(metric.value)
        if metric.nvmlReturn != NVML_SUCCESS:
            out[name] = (None, UNSUPPORTED)
        elif math.isfinite(value):
            out[name] = (round(value, 1), None)
        else:
            out[name] = (None, INVALID)
    return out


def _drop_sample(mig: MigSlot) -> None:
    if mig.gpm_sample is not None:
        free(mig.gpm_sample)
        mig.gpm_sample = None


def drop(slot: GpuSlot) -> None:
    """Forget the GPU's instances and free their GPM samples (MIG turned off, the GPU lost, NVML closing)."""
    for mig in slot.mig_slots:
        _drop_sample(mig)
    slot.mig_slots = []


def no_utilization(reasons: dict[str, str]) -> None:
    """In MIG mode, NVML's NOT_SUPPORTED for utilization is by design: say so instead of ``unsupported``."""
    for name in NO_UTILIZATION:
        if reasons.get(name) == UNSUPPORTED:
            reasons[name] = NOT_IN_MIG_MODE


# -- processes --------------------------------------------------------------------------------------------------


def _aggregate(slot: GpuSlot, variants: Variants, kind: ProcessKind) -> tuple[list[Any] | None, str | None]:
    """The parent's own list with each process's instance ids (v3, then v2: v1 structs carry none)."""
    base = "nvmlDeviceGetComputeRunningProcesses" if kind == COMPUTE else "nvmlDeviceGetGraphicsRunningProcesses"
    why: str | None = NOT_IN_DRIVER
    for variant in (3, 2):
        if variants.processes.get(kind) not in (None, variant):
            continue
        fn = getattr(pynvml, f"{base}_v{variant}", None)
        if fn is None:
            continue
        found, why = call(slot.unsupported, f"{base}_v{variant}", fn, slot.handle)
        if found is not None:
            variants.processes[kind] = variant
            return list(found), None
        if why != NOT_IN_DRIVER:
            break
    return None, why


Listed = dict[int, tuple[ProcessKind, int | None, MigSlot | None, int | None, int | None]]
"""PID → kind, memory, the instance that listed it (per-instance lists), and its GPU and compute instance ids."""


def _add(listed: Listed, pid: int, kind: ProcessKind, used: Any, mig: MigSlot | None, gi: Any, ci: Any) -> None:
    before = listed.get(pid)
    memory = None if used is None else int(used)
    if before is not None:
        kind = COMPUTE_GRAPHICS if before[0] != kind else kind
        memory = before[1] if memory is None else max(memory, before[1] or 0)
    gpu_instance = None if gi is None or int(gi) == NO_INSTANCE else int(gi)
    compute_instance = None if ci is None or int(ci) == NO_INSTANCE else int(ci)
    listed[pid] = (kind, memory, mig, gpu_instance, compute_instance)


KINDS: tuple[ProcessKind, ...] = (COMPUTE, GRAPHICS)


def read_processes(slot: GpuSlot, variants: Variants) -> list[GpuProcess]:
    """The processes on a GPU in MIG mode, each with its instance. The parent's aggregate list when the driver
    gives it (a privileged caller), else the list of every instance on its own handle; ``process_reason`` says
    why there is none where every instance refused (the notice then names it)."""
    listed: Listed = {}
    for kind in KINDS:
        found, _ = _aggregate(slot, variants, kind)
        for p in found or ():
            _add(listed, int(p.pid), kind, reported(p.usedGpuMemory), None, p.gpuInstanceId, p.computeInstanceId)
    answers: list[str | None] = []
    if not listed:  # the GPU's own list is root's: each instance's own list says what runs there
        for mig in slot.mig_slots:
            view = GpuSlot(index=slot.index, handle=mig.handle, unsupported=mig.unsupported)
            for kind in KINDS:
                pairs, why = running(view, variants, kind)
                if kind == COMPUTE:
                    answers.append(why)
                for pid, used in pairs or ():
                    _add(listed, pid, kind, used, mig, mig.gpu_instance_id, mig.compute_instance_id)
    slot.processes_per_instance = None in answers
    slot.process_reason = None if slot.processes_per_instance else next((w for w in answers if w), None)
    slot.process_notice = (
        f"GPU {slot.index}: no permission to list the processes of its MIG instances (run as root to see them)"
        if slot.process_reason == NO_PERMISSION
        else None
    )
    rows = []
    for pid in sorted(listed):
        kind, memory, mig, gi, ci = listed[pid]
        if mig is None and gi is not None:
            mig = next((m for m in slot.mig_slots if (m.gpu_instance_id, m.compute_instance_id) == (gi, ci)), None)
        reasons = {"sm_percent": NOT_IN_MIG_MODE, "memory_bandwidth_percent": NOT_IN_MIG_MODE}
        if memory is None:  # the call answered, with NVML_VALUE_NOT_AVAILABLE for this process
            reasons["gpu_memory_bytes"] = NOT_REPORTED
        rows.append(
            GpuProcess(
                pid=pid,
                gpu_index=slot.index,
                kind=kind,
                gpu_memory_bytes=memory,
                unavailable=frozen_reasons(reasons),
                mig_index=None if mig is None else mig.index,
                gpu_instance_id=gi,
                compute_instance_id=ci,
            )
        )
    return rows


def close(slot: GpuSlot) -> None:
    """Free what the GPU's instances hold; never raises (NVML may be going away)."""
    with contextlib.suppress(Exception):
        drop(slot)
