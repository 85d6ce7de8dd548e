"""NVML's errors, classified: ``reason_of`` turns an ``NVMLError`` into one of the reasons gputop shows, and the
``call`` wrapper returns that reason instead of raising.

This is the one mapping of NVML's errors to words: the collector and ``gputop doctor`` both read it, so that doctor
says what the dashboard shows. The return codes are those of nvml.h, spelled out under their NVML names so that
this module (and the reasons the dashboard shows without a driver) works with any nvidia-ml-py version, or none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputop.model import (
    GPU_ERROR,
    GPU_LOST_STATE,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    UNSUPPORTED,
    GpuState,
)
from gputop.sanitize import printable

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25

GONE = (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_RESET_REQUIRED)
"""Codes that mean the whole GPU is gone until a reset, not one value."""
LOST = "GPU is lost"
"""The reason for a value asked of a GPU that is gone (``GONE``): the collector raises ``GpuLost`` instead."""

NO_PYNVML = "the nvidia-ml-py package (module pynvml) is not installed"

INIT_REASONS = {
    NVML_ERROR_LIBRARY_NOT_FOUND: (
        "NVIDIA driver library libnvidia-ml.so.1 not found: no NVIDIA driver is installed here, "
        "or this container was started without GPU access (docker run --gpus all)"
    ),
    NVML_ERROR_DRIVER_NOT_LOADED: (
        "NVIDIA driver is not loaded: the nvidia kernel module is not running (try nvidia-smi)"
    ),
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "NVIDIA driver/library version mismatch: the kernel module and libnvidia-ml differ, usually after a "
        "driver upgrade; reload the nvidia kernel module or reboot"
    ),
    NVML_ERROR_NO_PERMISSION: "no permission to use the NVIDIA driver: check access to /dev/nvidia*",
}


class GpuLost(Exception):
    """The GPU cannot be read at all any more: raised out of a tick, which then shows it lost."""

    def __init__(self, state: GpuState, reason: str) -> None:
        super().__init__(reason)
        self.state: GpuState = state
        self.reason = reason


def nvml_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


def text(value: Any) -> str:
    """A string from the driver, made printable: a vGPU host or a broken board can put anything in a name."""
    return printable(value.decode(errors="replace") if isinstance(value, bytes) else str(value))


def reason_of(exc: BaseException) -> str:
    """An NVML error as the reason gputop shows for the value it cost: ``unsupported`` (this GPU has no such value),
    ``not in this driver`` (a missing symbol, a struct version the driver predates, or a wrapper this pynvml
    lacks), ``no permission``, ``GPU is lost`` (``GONE``), else NVML's own words."""
    code = nvml_code(exc)
    if code == NVML_ERROR_NOT_SUPPORTED:
        return UNSUPPORTED
    if code in (NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_ARGUMENT_VERSION_MISMATCH) or isinstance(exc, AttributeError):
        return NOT_IN_DRIVER
    if code == NVML_ERROR_NO_PERMISSION:
        return NO_PERMISSION
    if code in GONE:
        return LOST
    return f"error: {text(exc)}"


def init_reason(exc: BaseException) -> str:
    """Why ``nvmlInit`` failed, in words that say what to check."""
    code = nvml_code(exc)
    return (INIT_REASONS.get(code) if code is not None else None) or f"NVML initialisation failed: {text(exc)}"


def lost_reason(exc: BaseException) -> tuple[GpuState, str]:
    """The card state and the reason for a GPU that cannot be read at all."""
    code = nvml_code(exc)
    if code == NVML_ERROR_GPU_IS_LOST:
        return GPU_LOST_STATE, "GPU is lost (fell off the bus): it needs a reset or a reboot"
    if code == NVML_ERROR_RESET_REQUIRED:
        return GPU_LOST_STATE, "GPU requires a reset"
    if code == NVML_ERROR_NO_PERMISSION:
        return GPU_ERROR, "no permission to open this GPU"
    return GPU_ERROR, f"GPU could not be opened: {text(exc)}"


def call(unsupported: dict[str, str], key: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """Call ``fn``; return (value, None) or (None, reason). Raise ``GpuLost`` when the GPU is gone.

    What the GPU or the driver lacks (``unsupported``, ``not in this driver``) is remembered in ``unsupported``
    (one GPU's) under ``key``, so it is asked only once.
    """
    remembered = unsupported.get(key)
    if remembered is not None:
        return None, remembered
    try:
        return fn(*args), None
    except Exception as exc:
        if nvml_code(exc) in GONE:
            raise GpuLost(*lost_reason(exc)) from exc
        reason = reason_of(exc)
        if reason in (UNSUPPORTED, NOT_IN_DRIVER):
            unsupported[key] = reason
        return None, reason
