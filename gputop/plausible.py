"""The range each number of a snapshot can take: a value outside it is no reading, whoever gave it.

One table, used where numbers come in. The NVML collector holds the driver's answers to it (a broken board or a
vGPU host can answer a temperature of 4294967295 °C); the snapshot decoder holds what recordings, ``gputop stream
--full`` and remote hosts send to it (−50 %, 1e14 %, −1e15 °C, "16.0EiB / 0B" were shown as they came).

A value out of its range in a class that keeps reasons (``unavailable``) becomes None with a reason:
``INVALID`` (``invalid value from the driver``) in the collector, ``INVALID_VALUE`` (``invalid value``) in the
decoder. In a class that keeps none (the host's totals, a probe's counters) no gputop wrote it, and the decoder
refuses the snapshot, as it refuses a value of the wrong type.

The bounds are wide on purpose: they separate readings from nonsense (a negative size, a share above one, a GPU
with more memory than a rack), not healthy values from alarming ones, which the advisor judges.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping

from gputop.model import (
    CudaMemory,
    Gpu,
    GpuProcess,
    HostInfo,
    HostProcess,
    Launch,
    LoaderConfig,
    LoaderView,
    MainThread,
    MigInstance,
    PinnedHostMemory,
    ProbeReport,
    StepAnatomy,
    StepCost,
    SyncSite,
    TensorMemory,
    TrainingView,
    Worker,
    frozen_reasons,
)

Range = tuple[float, float]


class Reasoned(typing.Protocol):
    """A model object of a class that keeps reasons: a dataclass with an ``unavailable`` map."""

    __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[typing.Any]]]

    @property
    def unavailable(self) -> Mapping[str, str]: ...


T = typing.TypeVar("T", bound=Reasoned)

PERCENT: Range = (0.0, 100.0)
"""A share of time or of a maximum, in percent: NVML's utilization, GPM's metrics, a process's share of its GPU."""
SHARE: Range = (0.0, 1.0)
"""A share as a fraction: the time the loop waited for data, the main thread's busy share."""
UNBOUNDED: Range = (0.0, float("inf"))
"""A count, a rate or an age: not below zero (the decoder's type check bounds it above, ``gputop.codec.MAX_INT``
and ``MAX_FLOAT``)."""
MAX_CPUS = 8192
"""Linux's largest ``CONFIG_NR_CPUS``: no host has more CPUs, and ``psutil`` counts 100 % per CPU."""
MAX_PID = 4_194_304
"""The kernel's ``PID_MAX_LIMIT``: every process and every thread takes an id up to it (``gputop.limits``)."""
HOST_BYTES: Range = (0.0, 2.0**57)
"""Host memory, a process's RSS or USS: at most the 128 PiB that 5-level paging can address."""
GPU_BYTES: Range = (0.0, 16.0 * 2**40)
"""A GPU's memory, or what a process holds on one: up to 16 TiB, over 50 times the largest GPU's (B300, 288 GB).
A total of 0 is a reading (a GPU that reports none); a used or free amount is also at most the total
(``AT_MOST``)."""
TEMPERATURE_C: Range = (-273.15, 200.0)
"""From absolute zero to 200 °C: GPUs slow down and shut off at about 90-110 °C (``nvidia-smi -q``'s "GPU
Shutdown Temp"), solder melts at about 220 °C, so no reading of a working board is hotter."""
POWER_W: Range = (0.0, 10_000.0)
"""A board's draw or limit: up to 10 kW, seven times the largest board's (B300, 1,400 W)."""
FAN_PERCENT: Range = (0.0, 200.0)
"""NVML's fan speed is a percentage of the fan's rated speed that "may exceed 100% in certain cases" (nvml.h); no fan
spins at twice its rating."""
ENERGY_J: Range = (0.0, 1e13)
"""NVML's energy counter since the driver was loaded: 10 kW for 30 years is 9.5e12 J."""
MFU: Range = (0.0, 10.0)
"""Achieved FLOP/s over the peak: above 1 only where a FLOP count or a peak is wrong, which is shown, not hidden;
ten times the peak is no measurement."""
PSTATE: Range = (0.0, 15.0)
"""``NVML_PSTATE_0`` to ``NVML_PSTATE_15``; ``NVML_PSTATE_UNKNOWN`` (32) is read as unknown already."""
CLOCK_MHZ: Range = (0.0, 100_000.0)
"""A clock in MHz: about seven times the fastest that NVML reports (GDDR7's memory clock, about 14,000 MHz)."""
PCIE_BYTES_PER_S: Range = (0.0, 1e12)
"""PCIe traffic one way: 1 TB/s, four times PCIe 7.0 x16 (256 GB/s)."""
NVLINK_BYTES_PER_S: Range = (0.0, 1e13)
"""NVLink traffic over all links one way: 10 TB/s, eleven times NVLink 5's 900 GB/s a GPU."""
PCIE_LINK_GEN: Range = (0.0, 16.0)
"""PCIe generations run from 1 to 7 so far."""
PCIE_LINK_WIDTH: Range = (0.0, 32.0)
"""The widest PCIe link the specification has is x32."""
NVML_ID: Range = (0.0, 2.0**32 - 1)
"""An id NVML gives as an unsigned 32-bit integer (MIG instance ids)."""
MIG_SLOTS: Range = (0.0, 64.0)
"""A MIG instance's slot under its GPU: NVML has at most seven today."""
MULTIPROCESSORS: Range = (0.0, 4096.0)
"""SMs of a GPU or a MIG instance: the largest GPUs have under 200."""
THREAD_CPU_PERCENT: Range = (0.0, 200.0)
"""One thread runs on one CPU at a time: at most 100 %, read from clock ticks (1/100 s) over intervals down to
0.1 s, which can add a tick."""
PROCESS_CPU_PERCENT: Range = (0.0, 100.0 * MAX_CPUS)
"""A process, or all of a job's workers, on every CPU of the largest host."""


def _counts(cls: type) -> dict[str, Range]:
    """Every integer field of ``cls``, each a size, a count or an index: none is below zero."""
    return {name: UNBOUNDED for name, hint in typing.get_type_hints(cls).items() if hint in (int, int | None)}


RANGES: dict[type, dict[str, Range]] = {
    Gpu: {
        "memory_total_bytes": GPU_BYTES,
        "memory_used_bytes": GPU_BYTES,
        "memory_free_bytes": GPU_BYTES,
        "memory_reserved_bytes": GPU_BYTES,
        "utilization_gpu_percent": PERCENT,
        "utilization_memory_percent": PERCENT,
        "sm_activity_percent": PERCENT,
        "temperature_c": TEMPERATURE_C,
        "power_w": POWER_W,
        "power_limit_w": POWER_W,
        "fan_percent": FAN_PERCENT,
        "pstate": PSTATE,
        "clock_sm_mhz": CLOCK_MHZ,
        "clock_mem_mhz": CLOCK_MHZ,
        "clock_sm_max_mhz": CLOCK_MHZ,
        "clock_mem_max_mhz": CLOCK_MHZ,
        "pcie_rx_bytes_per_s": PCIE_BYTES_PER_S,
        "pcie_tx_bytes_per_s": PCIE_BYTES_PER_S,
        "ecc_uncorrected_volatile": UNBOUNDED,
        "pcie_link_gen": PCIE_LINK_GEN,
        "pcie_link_width": PCIE_LINK_WIDTH,
        "pcie_link_gen_max": PCIE_LINK_GEN,
        "pcie_link_width_max": PCIE_LINK_WIDTH,
        "sm_occupancy_percent": PERCENT,
        "tensor_activity_percent": PERCENT,
        "dram_bandwidth_percent": PERCENT,
        "fp64_activity_percent": PERCENT,
        "fp32_activity_percent": PERCENT,
        "fp16_activity_percent": PERCENT,
        "gpm_pcie_tx_bytes_per_s": PCIE_BYTES_PER_S,
        "gpm_pcie_rx_bytes_per_s": PCIE_BYTES_PER_S,
        "nvlink_tx_bytes_per_s": NVLINK_BYTES_PER_S,
        "nvlink_rx_bytes_per_s": NVLINK_BYTES_PER_S,
        "energy_j": ENERGY_J,
    },
    MigInstance: {
        "gpu_instance_id": NVML_ID,
        "compute_instance_id": NVML_ID,
        "multiprocessor_count": MULTIPROCESSORS,
        "memory_total_bytes": GPU_BYTES,
        "memory_used_bytes": GPU_BYTES,
        "sm_activity_percent": PERCENT,
        "tensor_activity_percent": PERCENT,
    },
    GpuProcess: {
        "gpu_memory_bytes": GPU_BYTES,
        "sm_percent": PERCENT,
        "memory_bandwidth_percent": PERCENT,
        "mig_index": MIG_SLOTS,
        "gpu_instance_id": NVML_ID,
        "compute_instance_id": NVML_ID,
    },
    HostProcess: {
        "ppid": (0.0, MAX_PID),
        "cpu_percent": PROCESS_CPU_PERCENT,
        "rss_bytes": HOST_BYTES,
        "num_threads": (0.0, MAX_PID),
    },
    Worker: {"worker_id": (0.0, MAX_PID), "uss_bytes": HOST_BYTES, "age_s": UNBOUNDED},
    MainThread: {"cpu_percent": THREAD_CPU_PERCENT, "busy_share": SHARE},
    LoaderView: {
        "window_s": UNBOUNDED,
        "data_wait_share": SHARE,
        "steps_per_s": UNBOUNDED,
        "samples_per_s": UNBOUNDED,
        "waiting_now_s": UNBOUNDED,
        "last_batch_age_s": UNBOUNDED,
        "pass_start_s": UNBOUNDED,
        "pass_start_wait_share": SHARE,
    },
    StepCost: {
        "energy_per_step_j": UNBOUNDED,
        "energy_per_sample_j": UNBOUNDED,
        "power_w": UNBOUNDED,
        "achieved_tflops": UNBOUNDED,
        "peak_tflops": UNBOUNDED,
        "mfu": MFU,
    },
    # Classes without reasons: gputop never writes these out of range.
    HostInfo: {
        "cpu_percent": PERCENT,
        "cpu_percent_per_core": PERCENT,
        "cpu_count": (1.0, MAX_CPUS),
        "usable_cpu_count": (0.0, MAX_CPUS),
        "load_average": UNBOUNDED,
        "memory_total_bytes": HOST_BYTES,
        "memory_used_bytes": HOST_BYTES,
        "memory_available_bytes": HOST_BYTES,
        "swap_total_bytes": HOST_BYTES,
        "swap_used_bytes": HOST_BYTES,
    },
    TrainingView: {
        "workers_cpu_percent": PROCESS_CPU_PERCENT,
        "usable_cpu_count": (0.0, MAX_CPUS),
        "workers_replaced": UNBOUNDED,
    },
    # What the probe reports, held to the ranges its reader holds a report to (``gputop.collect.probe_reader``).
    ProbeReport: {
        "age_s": UNBOUNDED,
        "rank": UNBOUNDED,
        "local_rank": UNBOUNDED,
        "world_size": UNBOUNDED,
        "failures": UNBOUNDED,
        "tensors_age_s": UNBOUNDED,
    },
    LoaderConfig: {
        "batch_size": UNBOUNDED,
        "num_workers": UNBOUNDED,
        "prefetch_factor": UNBOUNDED,
        "timeout_s": UNBOUNDED,
    },
    StepAnatomy: {
        **_counts(StepAnatomy),
        "window_s": UNBOUNDED,
        "step_s": UNBOUNDED,
        "step_p95_s": UNBOUNDED,
        "warmup_step_s": UNBOUNDED,
        "drift": UNBOUNDED,
        "steps_per_s": UNBOUNDED,
        "samples_per_s": UNBOUNDED,
        "phases_s": UNBOUNDED,
        "h2d_pageable_share": SHARE,
        "h2d_blocking_share": SHARE,
        "syncs_per_step": UNBOUNDED,
        "flops_per_step": UNBOUNDED,
    },
    SyncSite: {"per_step": UNBOUNDED},
    CudaMemory: _counts(CudaMemory),
    PinnedHostMemory: _counts(PinnedHostMemory),
    TensorMemory: _counts(TensorMemory),
    Launch: {
        "rank": UNBOUNDED,
        "local_rank": UNBOUNDED,
        "world_size": UNBOUNDED,
        "local_world_size": UNBOUNDED,
        "group_rank": UNBOUNDED,
        "master_port": (0.0, 65535.0),
    },
}
"""By class, the range of each number field (of each item, for a tuple of numbers)."""

AT_MOST: dict[type, dict[str, str]] = {
    Gpu: {
        "memory_used_bytes": "memory_total_bytes",
        "memory_free_bytes": "memory_total_bytes",
        "memory_reserved_bytes": "memory_total_bytes",
    },
    MigInstance: {"memory_used_bytes": "memory_total_bytes"},
    HostInfo: {
        "memory_used_bytes": "memory_total_bytes",
        "memory_available_bytes": "memory_total_bytes",
        "swap_used_bytes": "swap_total_bytes",
    },
}
"""By class, the fields that cannot exceed another of the same object: a part of a whole."""

KEEPS_REASONS = frozenset({Gpu, MigInstance, GpuProcess, HostProcess, Worker, MainThread, LoaderView, StepCost})
"""The classes with an ``unavailable`` map: a value out of range there is None with a reason."""


def out_of_range(cls: type, value_of: Callable[[str], object]) -> list[str]:
    """The fields of a ``cls`` whose values (``value_of(name)``; None for one not known) lie outside their range:
    ``RANGES``, then ``AT_MOST`` against a whole that is itself in range."""
    ranges = RANGES.get(cls)
    if ranges is None:
        return []
    bad = [name for name, bounds in ranges.items() if not _within(value_of(name), bounds)]
    return bad + parts_over(cls, value_of, bad)


def parts_over(cls: type, value_of: Callable[[str], object], skip: list[str]) -> list[str]:
    """The fields of a ``cls`` that exceed the whole they are part of (``AT_MOST``), where neither is in ``skip``."""
    over = []
    for part, whole in AT_MOST.get(cls, {}).items():
        value, limit = value_of(part), value_of(whole)
        if part not in skip and whole not in skip and _number(value) and _number(limit) and value > limit:
            over.append(part)
    return over


def _number(value: object) -> typing.TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _within(value: object, bounds: Range) -> bool:
    """Whether a value (None: not known; a tuple: each of its items) lies within ``bounds``. NaN does not."""
    low, high = bounds
    if isinstance(value, tuple):
        return all(low <= item <= high for item in value)
    return value is None or (isinstance(value, (int, float)) and low <= value <= high)


def bounded(reading: T, reason: str) -> T:
    """``reading`` (a model object of a class that keeps reasons) with each value out of range None, and
    ``reason`` for it in ``unavailable``: what a collector passes on."""
    cls = type(reading)
    bad = out_of_range(cls, lambda name: getattr(reading, name))
    if not bad:
        return reading
    reasons = frozen_reasons({**reading.unavailable, **dict.fromkeys(bad, reason)})
    return dataclasses.replace(reading, **dict.fromkeys(bad), unavailable=reasons)
