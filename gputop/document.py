"""The JSON document of ``gputop --once --json`` and ``gputop stream``: schema 1, described in docs/json.md.

Unlike the lossless snapshot codec (``gputop.codec``), it is a stable, flat document for scripts: a process row
carries its host process's fields beside its GPU ones, and fields outside the schema are left out.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from gputop.breakdown import DeviceMemory, device_memory
from gputop.jobs import Job, find_jobs
from gputop.model import (
    GPM_PROFILE_FIELDS,
    Container,
    Gpu,
    GpuHealth,
    GpuProcess,
    HostInfo,
    HostProcess,
    MigInstance,
    Pod,
    SlurmJob,
    Snapshot,
    TrainingView,
    Worker,
)

SCHEMA = 1

GPU_KEYS = (
    "index",
    "uuid",
    "name",
    "state",
    "reason",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "sm_activity_percent",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "fan_percent",
    "pstate",
    "clock_sm_mhz",
    "clock_mem_mhz",
    "clock_sm_max_mhz",
    "clock_mem_max_mhz",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "throttle_reasons",
    "ecc_uncorrected_volatile",
    "ecc_enabled",
    "pcie_link_gen",
    "pcie_link_width",
    "pcie_link_gen_max",
    "pcie_link_width_max",
)
GPU_ENERGY_KEYS = ("energy_j",)
"""NVML's energy counter, after GPM's profiling metrics: joules since the driver was loaded."""
GPU_MIG_KEYS = ("mig_mode", "mig_pending_mode")
"""Keys added to a GPU object after ``unavailable`` (schema 1 grows by new keys only), before its ``mig`` list."""
MIG_KEYS = (
    "index",
    "gpu_instance_id",
    "compute_instance_id",
    "profile",
    "uuid",
    "multiprocessor_count",
    "memory_total_bytes",
    "memory_used_bytes",
    "sm_activity_percent",
    "tensor_activity_percent",
)
PROCESS_MIG_KEYS = ("mig_index", "gpu_instance_id", "compute_instance_id")
"""A process row's MIG instance, after its ``unavailable``: null off MIG."""
CONTAINER_KEYS = ("runtime", "id", "pod_uid", "name", "path")
"""A process row's ``container`` object (docs/json.md), after its MIG keys: null for a process in no container or
whose cgroup could not be read (then with its reason in ``unavailable``)."""
POD_KEYS = ("namespace", "name", "container", "source")
"""A process row's ``pod`` object (docs/json.md, docs/kubernetes.md)."""
SLURM_KEYS = ("id", "step", "name", "user", "state", "gpus")
"""A process row's ``slurm`` object (docs/json.md), after its ``container``: null for a process in no Slurm job;
each value null where Slurm did not say, with its reason under ``slurm.<key>`` in the row's ``unavailable``."""
PROCESS_GPU_KEYS = ("pid", "gpu_index", "kind", "gpu_memory_bytes", "sm_percent", "memory_bandwidth_percent")
PROCESS_HOST_KEYS = ("user", "name", "command", "cpu_percent", "rss_bytes", "start_time", "status", "visible")
"""A process row's keys from its host process, after those from its GPU side."""
PROCESS_KEYS = PROCESS_GPU_KEYS + PROCESS_HOST_KEYS
WORKER_KEYS = (
    "pid",
    "parent_pid",
    "worker_id",
    "status",
    "cpu_percent",
    "rss_bytes",
    "uss_bytes",
    "age_s",
    "unavailable",
)
"""A worker object's keys in ``training[].workers[]`` (docs/training.md)."""
WORKER_HOST_KEYS = {
    "pid": "pid",
    "parent_pid": "ppid",
    "status": "status",
    "cpu_percent": "cpu_percent",
    "rss_bytes": "rss_bytes",
}
"""A worker object's keys taken from its host process, and the ``HostProcess`` field of each."""
HOST_KEYS = (
    "hostname",
    "cpu_percent",
    "cpu_percent_per_core",
    "cpu_count",
    "usable_cpu_count",
    "load_average",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_available_bytes",
    "swap_total_bytes",
    "swap_used_bytes",
)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _record(obj: Gpu | HostInfo | MigInstance, keys: tuple[str, ...]) -> dict[str, Any]:
    out = {key: _plain(getattr(obj, key)) for key in keys}
    unavailable = getattr(obj, "unavailable", None)
    if unavailable is not None:
        out["unavailable"] = dict(unavailable)
    return out


def process_record(p: GpuProcess) -> dict[str, Any]:
    """One process row of schema 1: flat, its GPU-side keys then its host process's, and one ``unavailable``
    holding the reasons of both sides. A row whose host side was never joined has every host value null."""
    host = p.host or HostProcess(p.pid)
    out = {key: _plain(getattr(p, key)) for key in PROCESS_GPU_KEYS}
    out.update((key, _plain(getattr(host, key))) for key in PROCESS_HOST_KEYS)
    out["unavailable"] = {**p.unavailable, **host.unavailable}
    out.update((key, getattr(p, key)) for key in PROCESS_MIG_KEYS)
    out["container"] = container_record(host.container)
    out["pod"] = pod_record(host.pod)
    out["slurm"] = slurm_record(host.slurm)
    if host.slurm is not None:
        out["unavailable"].update((f"slurm.{key}", reason) for key, reason in host.slurm.unavailable.items())
    return out


def slurm_record(job: SlurmJob | None) -> dict[str, Any] | None:
    """A process's Slurm job as schema 1 writes it, its GPUs a list."""
    return None if job is None else {key: _plain(getattr(job, key)) for key in SLURM_KEYS}


def container_record(container: Container | None) -> dict[str, Any] | None:
    """A process's container as schema 1 writes it: the full id, not the 12 digits the dashboard shows."""
    return None if container is None else {key: getattr(container, key) for key in CONTAINER_KEYS}


def pod_record(pod: Pod | None) -> dict[str, Any] | None:
    """A process's pod by name as schema 1 writes it, after its container: null for a process in no pod, or with
    its reason in ``unavailable`` (key ``pod``) where no source on the node named it."""
    return None if pod is None else {key: getattr(pod, key) for key in POD_KEYS}


def gpu_record(g: Gpu) -> dict[str, Any]:
    """One GPU object of schema 1: its keys, ``unavailable``, its MIG mode, GPM's profiling metrics, its energy
    counter, its health, its PCI bus id, then its MIG instances."""
    out = _record(g, GPU_KEYS)
    out.update((key, getattr(g, key)) for key in GPU_MIG_KEYS)
    out.update((key, getattr(g, key)) for key in GPM_PROFILE_FIELDS)
    out.update((key, getattr(g, key)) for key in GPU_ENERGY_KEYS)
    out["health"] = health_record(g.health)
    out["pci_bus_id"] = g.pci_bus_id
    out["mig"] = [_record(m, MIG_KEYS) for m in g.mig]
    return out


def health_record(health: GpuHealth | None) -> dict[str, Any] | None:
    """A GPU's ``health`` object (docs/health.md): its state and causes, each Xid seen with its count and last
    time, the counters, and ``unavailable`` for those the GPU or driver does not have; null where it was not read
    (the reason under the GPU's ``unavailable``)."""
    if health is None:
        return None
    out = {f.name: _plain(getattr(health, f.name)) for f in dataclasses.fields(health)}
    out["xids"] = [{"xid": x.xid, "count": x.count, "last_time": x.last_time} for x in health.xids]
    out["violation_s"] = dict(health.violation_s)
    out["unavailable"] = dict(health.unavailable)
    return out


def snapshot_to_dict(snap: Snapshot) -> dict[str, Any]:
    """The snapshot as the stable JSON document; values that could not be read are null."""
    driver = snap.driver
    return {
        "schema": SCHEMA,
        "time": snap.time,
        "host": _record(snap.host, HOST_KEYS),
        "driver": {
            "status": driver.status,
            "reason": driver.reason,
            "driver_version": driver.driver_version,
            "cuda_version": driver.cuda_version,
            "nvml_version": driver.nvml_version,
        },
        "gpus": [gpu_record(g) for g in snap.gpus],
        "processes": [process_record(p) for p in snap.processes],
        "notices": list(snap.notices),
        "training": [training_to_dict(v) for v in snap.training],
        "jobs": [job_record(job) for job in find_jobs(snap)],
    }


def job_record(job: Job) -> dict[str, Any]:
    """One training job: its id and kind, how many ranks its launcher started, the agents' PIDs and its ranks in
    order, each a PID to look up in ``training`` and ``processes``."""
    return {
        "id": job.id,
        "kind": job.kind,
        "world_size": job.world_size,
        "agent_pids": list(job.agent_pids),
        "ranks": [{"pid": r.pid, "rank": r.rank, "local_rank": r.local_rank} for r in job.ranks],
    }


def worker_record(w: Worker) -> dict[str, Any]:
    """One worker object of schema 1: flat, its host process's values under the worker's key names, and one
    ``unavailable`` holding the reasons for both (those for the host's other fields left out)."""
    key_of = {field: key for key, field in WORKER_HOST_KEYS.items()}
    out = {
        key: getattr(w.host, WORKER_HOST_KEYS[key]) if key in WORKER_HOST_KEYS else getattr(w, key)
        for key in WORKER_KEYS[:-1]
    }
    host_reasons = {key_of[field]: reason for field, reason in w.host.unavailable.items() if field in key_of}
    out["unavailable"] = {**host_reasons, **w.unavailable}
    return out


def training_to_dict(view: TrainingView) -> dict[str, Any]:
    """A training view with every model field under its own name, nested views as objects (docs/training.md);
    each worker flat, as ``worker_record`` writes it; and ``memory``, the parts of each device's memory
    (docs/memory.md), computed from the probe's figures."""
    out: dict[str, Any] = _fields(view)
    out["memory"] = [memory_record(device) for device in device_memory(view.probe)]
    return out


def memory_record(device: DeviceMemory) -> dict[str, Any]:
    """One device's memory parts: ``{"device", "gpu_index", "parameters", "weight_dtypes", "parts": {part: bytes
    or null}, "total_bytes"}``."""
    return {
        "device": device.device,
        "gpu_index": device.gpu_index,
        "parameters": device.parameters,
        "weight_dtypes": dict(device.weight_dtypes),
        "parts": dict(device.parts()),
        "total_bytes": device.total,
    }


def _fields(value: Any) -> Any:
    if isinstance(value, Worker):
        return worker_record(value)
    if dataclasses.is_dataclass(value):
        return {f.name: _fields(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _fields(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_fields(v) for v in value]
    return value


def snapshot_to_json(snap: Snapshot, indent: int | None = 2) -> str:
    return json.dumps(snapshot_to_dict(snap), indent=indent)
