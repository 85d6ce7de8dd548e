"""NVML GPM (Hopper and newer): SM activity and the other profiling metrics, between this tick's sample and the
previous one."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
from typing import Any

from gputop.collect.nvml.errors import LOST, NVML_SUCCESS, GpuLost, call
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
    """Free the GPU's samples: the next reading starts measuring again."""
    for sample in (slot.gpm_sample, slot.gpm_spare):
        if sample is not None:
            free(sample)
    slot.gpm_sample = slot.gpm_spare = None


KEPLER, HOPPER = 2, 9
"""nvml.h's ``NVML_DEVICE_ARCH_KEPLER`` and ``NVML_DEVICE_ARCH_HOPPER``, GPM's first architecture: the ones between
(Maxwell to Ada) have no GPM whatever the driver."""


def supported(slot: GpuSlot) -> bool:
    """Whether the GPU answers GPM; if not, ``slot.unsupported["gpm"]`` says why: ``unsupported`` where the GPU
    has none (older than Hopper, known from the driver's answer or from its architecture where a driver without
    GPM names it), ``not in this driver`` where only the driver stands in the way, or NVML's refusal."""
    if not hasattr(pynvml, "nvmlGpmQueryDeviceSupport"):
        slot.unsupported["gpm"] = _without_gpm(slot)
        return False
    support, why = call(slot.unsupported, "gpm", pynvml.nvmlGpmQueryDeviceSupport, slot.handle)
    if support is None:
        slot.unsupported["gpm"] = _without_gpm(slot) if why == NOT_IN_DRIVER else why or UNSUPPORTED
        return False
    if not support.isSupportedDevice:
        slot.unsupported["gpm"] = UNSUPPORTED
        return False
    return True


def gpm_support(index: int, handle: Any) -> tuple[bool | None, str | None]:
    """Whether a GPU has GPM, asked as the collector asks it (``supported``), of its handle alone: ``(True,
    None)``; ``(False, None)`` where the GPU has none (older than Hopper); ``(None, reason)`` where the driver or
    NVML stands in the way, ``GPU is lost`` included. Never raises for an NVML error."""
    slot = GpuSlot(index=index, handle=handle)
    try:
        if supported(slot):
            return True, None
    except GpuLost:
        return None, LOST
    why = slot.unsupported.get("gpm", UNSUPPORTED)
    return (False, None) if why == UNSUPPORTED else (None, why)


def _without_gpm(slot: GpuSlot) -> str:
    """Why a driver without GPM gives none: the GPU's own lack where its architecture predates Hopper (a newer
    driver would not help), else the driver."""
    ask = getattr(pynvml, "nvmlDeviceGetArchitecture", None)
    architecture = call(slot.unsupported, "architecture", ask, slot.handle)[0] if ask is not None else None
    return UNSUPPORTED if isinstance(architecture, int) and KEPLER <= architecture < HOPPER else NOT_IN_DRIVER


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


@functools.cache
def _request_type() -> type[ctypes.Structure]:
    """``nvmlGpmMetricsGet_t`` with pynvml's layout (its own field lists), as plain ctypes structures: pynvml's
    carry a ``__getattribute__`` per field read, and a tick reads three fields of eleven metrics on every GPU.
    Made on first use: a pynvml without GPM has no such types."""

    class Metric(ctypes.Structure):
        _fields_ = pynvml.c_nvmlGpmMetric_t._fields_

    class Request(ctypes.Structure):
        _fields_ = [
            (name, Metric * pynvml.NVML_GPM_METRIC_MAX if name == "metrics" else kind)
            for name, kind in pynvml.c_nvmlGpmMetricsGet_t._fields_
        ]

    return Request


def _metric_ids() -> tuple[list[tuple[int, str, int | None]], list[str]]:
    """The metric ids this pynvml knows, with their field and scale; the fields it does not know."""
    known, missing = [], []
    for name, metric_name, scale in METRICS:
        metric = getattr(pynvml, metric_name, None)
        if isinstance(metric, int):
            known.append((metric, name, scale))
        else:
            missing.append(name)
    return known, missing


def read(slot: GpuSlot, put: Put) -> None:
    """Every ``METRICS`` field between the previous tick's sample and this one's, in one request.

    Two sample buffers per GPU take turns (the older one receives the next sample) and the request is built once,
    so a tick costs two NVML calls per GPU, not four, and no allocation."""

    def every(why: str) -> None:
        for name in FIELDS:
            put(name, None, why)

    if slot.gpm_supported is None:
        slot.gpm_supported = supported(slot)
    if not slot.gpm_supported:
        every(slot.unsupported.get("gpm", UNSUPPORTED))
        return
    sample, slot.gpm_spare = slot.gpm_spare, None
    if sample is None:
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
    request = slot.gpm_request
    if request is None:
        known, missing = _metric_ids()
        request = slot.gpm_request = _request_type()()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        for i, (metric, _, _) in enumerate(known):
            request.metrics[i].metricId = metric
        slot.gpm_asked = ([(name, scale) for _, name, scale in known], missing)
    asked, missing = slot.gpm_asked
    for name in missing:
        put(name, None, NOT_IN_DRIVER)
    request.numMetrics = len(asked)
    request.sample1 = previous
    request.sample2 = sample
    result, why = call(slot.unsupported, "gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
    slot.gpm_spare = previous
    if result is None:
        for name, _ in asked:
            put(name, None, why)
        return
    metrics = request.metrics
    for i, (name, scale) in enumerate(asked):
        metric = metrics[i]
        value = metric.value
        if metric.nvmlReturn != NVML_SUCCESS:
            put(name, None, UNSUPPORTED)
        elif not math.isfinite(value) or (scale is not None and value < 0):
            put(name, None, INVALID)  # a double from the driver: NaN would make --json invalid
        elif scale is None:
            put(name, round(value, 1), None)
        else:
            put(name, round(value * scale), None)
