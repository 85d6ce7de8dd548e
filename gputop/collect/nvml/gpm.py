"""SM activity from NVML GPM (Hopper and newer): a metric between this tick's sample and the previous one."""

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


def read_sm_activity(slot: GpuSlot, put: Put) -> None:
    """``sm_activity_percent``: the share of SMs busy since the previous tick's sample."""
    if slot.gpm_supported is None:
        slot.gpm_supported = supported(slot)
    if not slot.gpm_supported:
        put("sm_activity_percent", None, slot.unsupported.get("gpm", UNSUPPORTED))
        return
    try:
        sample = pynvml.nvmlGpmSampleAlloc()
    except Exception:
        slot.gpm_supported = False
        put("sm_activity_percent", None, UNSUPPORTED)
        return
    _taken, why = call(slot.unsupported, "gpm_sample", pynvml.nvmlGpmSampleGet, slot.handle, sample)
    if why is not None:
        free(sample)
        put("sm_activity_percent", None, why)
        return
    previous, slot.gpm_sample = slot.gpm_sample, sample
    if previous is None:
        put("sm_activity_percent", None, MEASURING)
        return
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1 = previous
    request.sample2 = sample
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    result, why = call(slot.unsupported, "gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
    free(previous)
    if result is None:
        put("sm_activity_percent", None, why)
    elif result.metrics[0].nvmlReturn != NVML_SUCCESS:
        put("sm_activity_percent", None, UNSUPPORTED)
    else:
        value = float(result.metrics[0].value)
        if math.isfinite(value):
            put("sm_activity_percent", round(value, 1), None)
        else:  # a double from the driver: NaN would make --json invalid and every comparison false
            put("sm_activity_percent", None, INVALID)
