"""NVML GPM (Hopper and newer): SM activity and the other profiling metrics, between this tick's sample and the
previous one."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from gputop.collect.nvml.errors import NVML_SUCCESS, call
from gputop.collect.nvml.slot import GpuSlot, Put
from gputop.model import INVALID, MEASURING, NOT_IN_DRIVER, UNSUPPORTED

try:
    import pynvml
except ImportError:
    pynvml = None


def free(sample: Any) -> None:
    with contextlib.suppress(Exception):
        pynvml.nvmlGpmSampleFree(sample)


def drop(slot: GpuSlot) -> None:
    """Free the GPU's last sample: the next reading starts measuring again."""
    if slot.gpm_sample is not None:
        free(slot.gpm_sample)
        slot.gpm_sample = None


def supported(slot: GpuSlot) -> bool:
    if not hasattr(pynvml, "nvmlGpmQueryDeviceSupport"):
        slot.unsupported["gpm"] = NOT_IN_DRIVER
        return False
    support, why = call(slot.unsupported, "gpm", pynvml.nvmlGpmQueryDeviceSupport, slot.handle)
    if support is None:
        slot.unsupported["gpm"] = why or UNSUPPORTED
        return False
    if not support.isSupportedDevice:
        slot.unsupported["gpm"] = UNSUPPORTED
        return False
    return True


MIB = 1024 * 1024
METRICS: tuple[tuple[str, str, int | None], ...] = (
    ("sm_activity_percent", "NVML_GPM_METRIC_SM_UTIL", None),
    ("sm_occupancy_percent", "NVML_GPM_METRIC_SM_OCCUPANCY", None),
    ("tensor_activity_percent", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", None),
    ("dram_bandwidth_percent", "NVML_GPM_METRIC_DRAM_BW_UTIL", None),
    ("fp64_activity_percent", "NVML_GPM_METRIC_FP64_UTIL", None),
    ("fp32_activity_percent", "NVML_GPM_METRIC_FP32_UTIL", None),
    ("fp16_activity_percent", "NVML_GPM_METRIC_FP16_UTIL", None),
    ("gpm_pcie_tx_bytes_per_s", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", MIB),
    ("gpm_pcie_rx_bytes_per_s", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", MIB),
    ("nvlink_tx_bytes_per_s", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", MIB),
    ("nvlink_rx_bytes_per_s", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", MIB),
)
"""Each ``Gpu`` field read from GPM: its pynvml metric id's name, and the multiplier to bytes for a rate that
nvml.h gives in MiB/s (None: a percentage, kept as a float). All go in one ``nvmlGpmMetricsGet`` request."""
FIELDS = tuple(name for name, _, _ in METRICS)


def read(slot: GpuSlot, put: Put) -> None:
    """Every ``METRICS`` field between the previous tick's sample and this one's, in one request."""

    def every(why: str) -> None:
        for name in FIELDS:
            put(name, None, why)

    if slot.gpm_supported is None:
        slot.gpm_supported = supported(slot)
    if not slot.gpm_supported:
        every(slot.unsupported.get("gpm", UNSUPPORTED))
        return
    try:
        sample = pynvml.nvmlGpmSampleAlloc()
    except Exception:
        slot.gpm_supported = False
        every(UNSUPPORTED)
        return
    _taken, why = call(slot.unsupported, "gpm_sample", pynvml.nvmlGpmSampleGet, slot.handle, sample)
    if why is not None:
        free(sample)
        every(why)
        return
    previous, slot.gpm_sample = slot.gpm_sample, sample
    if previous is None:
        every(MEASURING)
        return
    asked: list[tuple[str, int | None]] = []
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.sample1 = previous
    request.sample2 = sample
    for name, metric_name, scale in METRICS:
        metric = getattr(pynvml, metric_name, None)
        if not isinstance(metric, int):
            put(name, None, NOT_IN_DRIVER)
            continue
        request.metrics[len(asked)].metricId = metric
        asked.append((name, scale))
    request.numMetrics = len(asked)
    result, why = call(slot.unsupported, "gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
    free(previous)
    for i, (name, scale) in enumerate(asked):
        if result is None:
            put(name, None, why)
            continue
        metric = result.metrics[i]
        value = float(metric.value)
        if metric.nvmlReturn != NVML_SUCCESS:
            put(name, None, UNSUPPORTED)
        elif not math.isfinite(value) or (scale is not None and value < 0):
            put(name, None, INVALID)  # a double from the driver: NaN would make --json invalid
        elif scale is None:
            put(name, round(value, 1), None)
        else:
            put(name, round(value * scale), None)
