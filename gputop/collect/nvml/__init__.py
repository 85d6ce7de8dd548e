"""NVML collector: GPUs and the processes on them, through pynvml.

Every NVML call goes through one wrapper that turns NVML's errors into a reason instead of an exception, so
one GPU or one unsupported field never costs the others. The collector is used from one thread only.

What differs between driver branches is handled by trying the newest form of a call first and remembering
which one the loaded driver really answered:

- running processes: ``_v3`` → ``_v2`` → the legacy v1 symbol (v1 structs have no MIG ids);
- memory: ``nvmlDeviceGetMemoryInfo_v2`` (separates reserved memory) → v1 (``used`` includes reserved);
- clock reasons: ``nvmlDeviceGetCurrentClocksEventReasons`` (R535+) → ``...ThrottleReasons``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputop.model import (
    COMPUTE,
    COMPUTE_GRAPHICS,
    DRIVER_OK,
    DRIVER_UNAVAILABLE,
    GPU_ERROR,
    GPU_LOST_STATE,
    GPU_OK,
    GRAPHICS,
    INVALID,
    MEASURING,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    UNSUPPORTED,
    DriverInfo,
    Gpu,
    frozen_reasons,
)
from gputop.sanitize import printable

try:
    import pynvml
except ImportError:  # the dashboard still runs (host side only) where nvidia-ml-py is absent
    pynvml = None

# NVML return codes (nvml.h); spelled out so this module works with any nvidia-ml-py version.
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_RESET_REQUIRED = 16
_LIB_RM_VERSION_MISMATCH = 18
_ARGUMENT_VERSION_MISMATCH = 25

_NVML_MEMORY_V2 = 0x02000028  # NVML_STRUCT_VERSION(Memory, 2) for the 40-byte nvmlMemory_v2_t
_PSTATE_UNKNOWN = 32
_GPM_SM_UTIL = 2  # NVML_GPM_METRIC_SM_UTIL: share of SMs busy, 0-100
_KIB = 1024

# nvmlClocksEventReason* bits (nvml.h) and the names gputop uses for them.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

INIT_REASONS = {
    _LIBRARY_NOT_FOUND: (
        "NVIDIA driver library libnvidia-ml.so.1 not found: no NVIDIA driver is installed here, "
        "or this container was started without GPU access (docker run --gpus all)"
    ),
    _DRIVER_NOT_LOADED: "NVIDIA driver is not loaded: the nvidia kernel module is not running (try nvidia-smi)",
    _LIB_RM_VERSION_MISMATCH: (
        "NVIDIA driver/library version mismatch: the kernel module and libnvidia-ml differ, usually after a "
        "driver upgrade; reload the nvidia kernel module or reboot"
    ),
    _NO_PERMISSION: "no permission to use the NVIDIA driver: check access to /dev/nvidia*",
}


def decode_clock_reasons(mask: int) -> tuple[str, ...]:
    """Names of the active clock-event (throttle) reasons in an NVML bitmask."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)


def cuda_version_text(version: int) -> str:
    """NVML's integer CUDA driver version (12040) as users write it (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}"


class _GpuLost(Exception):
    def __init__(self, state: str, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NvmlProcess:
    """One process on one GPU as NVML sees it, before the host side is added."""

    pid: int
    gpu_index: int
    kind: str
    gpu_memory_bytes: int | None
    sm_percent: float | None
    memory_bandwidth_percent: float | None
    unavailable: dict[str, str] = field(default_factory=dict)


class _V1ProcessInfo(ctypes.Structure):
    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


@dataclass
class _GpuSlot:
    """What the collector remembers about one GPU between ticks."""

    index: int
    handle: Any = None
    name: str | None = None
    uuid: str | None = None
    max_clocks: tuple[int | None, int | None] | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    lost_reason: str | None = None
    lost_state: str = GPU_LOST_STATE
    retry_at: float = 0.0
    slow: dict[str, Any] = field(default_factory=dict)
    slow_reasons: dict[str, str] = field(default_factory=dict)
    processes: list[NvmlProcess] = field(default_factory=list)
    # Process lists are read on the slow cadence only; their notice is kept with them so that fast ticks,
    # which reuse the lists, repeat it instead of dropping it until the next slow tick.
    process_notice: str | None = None
    process_samples: dict[int, tuple[int, float, float]] = field(default_factory=dict)
    last_sample_us: int = 0
    gpm_sample: Any = None
    gpm_supported: bool | None = None


def _nvml_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


def _text(value: Any) -> str:
    # The driver's strings reach the terminal: a vGPU host or a broken board can put anything in a name.
    return printable(value.decode(errors="replace") if isinstance(value, bytes) else str(value))


class NvmlCollector:
    """Reads every GPU through NVML. Never raises; a failure becomes a reason on the value it concerns.

    Args:
        retry_lost_after_s: how long a lost GPU is left alone before its handle is fetched again.
        sample_stale_s: how old a per-process utilization sample may be and still be shown.
    """

    def __init__(self, retry_lost_after_s: float = 5.0, sample_stale_s: float = 10.0) -> None:
        self.retry_lost_after_s = retry_lost_after_s
        self.sample_stale_s = sample_stale_s
        self.driver = DriverInfo(status=DRIVER_UNAVAILABLE, reason="not started")
        self._slots: list[_GpuSlot] = []
        self._started = False
        # Which variant of a versioned call the loaded driver answered; decided once, on first success.
        self._process_variant: dict[str, int] = {}
        self._memory_v2: bool | None = None
        self._reasons_fn: str | None = None
        self.notices: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> DriverInfo:
        """Initialise NVML once and read the driver's identity. Safe to call again: it does nothing then."""
        if self._started:
            return self.driver
        self._started = True
        if pynvml is None:
            self.driver = DriverInfo(DRIVER_UNAVAILABLE, "the nvidia-ml-py package (module pynvml) is not installed")
            return self.driver
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # pynvml raises NVMLError subclasses, and OSError from a broken library
            code = _nvml_code(exc)
            reason = INIT_REASONS.get(code) if code is not None else None
            self.driver = DriverInfo(DRIVER_UNAVAILABLE, reason or f"NVML initialisation failed: {_text(exc)}")
            return self.driver
        self.driver = DriverInfo(
            status=DRIVER_OK,
            driver_version=self._system(pynvml.nvmlSystemGetDriverVersion),
            nvml_version=self._system(pynvml.nvmlSystemGetNVMLVersion),
            cuda_version=self._cuda_version(),
        )
        try:
            count = pynvml.nvmlDeviceGetCount()
        except Exception as exc:
            self.driver = DriverInfo(
                DRIVER_UNAVAILABLE,
                f"NVML could not count the GPUs: {_text(exc)}",
                self.driver.driver_version,
                self.driver.cuda_version,
                self.driver.nvml_version,
            )
            return self.driver
        self._slots = [_GpuSlot(index=i) for i in range(count)]
        for slot in self._slots:
            self._open(slot, time.monotonic())
        return self.driver

    def close(self) -> None:
        """Free GPM samples and shut NVML down."""
        if not self._started or not self.driver.ok:
            return
        for slot in self._slots:
            if slot.gpm_sample is not None:
                self._quiet(pynvml.nvmlGpmSampleFree, slot.gpm_sample)
                slot.gpm_sample = None
        self._quiet(pynvml.nvmlShutdown)
        self._started = False

    @staticmethod
    def _quiet(fn: Callable[..., Any], *args: Any) -> None:
        with contextlib.suppress(Exception):
            fn(*args)

    @staticmethod
    def _system(fn: Callable[[], Any]) -> str | None:
        try:
            return _text(fn())
        except Exception:
            return None

    def _cuda_version(self) -> str | None:
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            try:
                return cuda_version_text(int(fn()))
            except Exception:
                continue
        return None

    def _open(self, slot: _GpuSlot, now: float) -> None:
        """Fetch the GPU's handle and its fixed facts; a failure marks the GPU lost until a later retry."""
        try:
            slot.handle = pynvml.nvmlDeviceGetHandleByIndex(slot.index)
        except Exception as exc:
            slot.handle = None
            slot.lost_state, slot.lost_reason = self._lost_reason(exc)
            slot.retry_at = now + self.retry_lost_after_s
            return
        slot.lost_reason = None
        if slot.name is None:
            slot.name = self._system(lambda: pynvml.nvmlDeviceGetName(slot.handle))
        if slot.uuid is None:
            slot.uuid = self._system(lambda: pynvml.nvmlDeviceGetUUID(slot.handle))

    @staticmethod
    def _lost_reason(exc: BaseException) -> tuple[str, str]:
        """The card state and the reason for a GPU that cannot be read at all."""
        code = _nvml_code(exc)
        if code == _GPU_IS_LOST:
            return GPU_LOST_STATE, "GPU is lost (fell off the bus): it needs a reset or a reboot"
        if code == _RESET_REQUIRED:
            return GPU_LOST_STATE, "GPU requires a reset"
        if code == _NO_PERMISSION:
            return GPU_ERROR, "no permission to open this GPU"
        return GPU_ERROR, f"GPU could not be opened: {_text(exc)}"

    # -- one NVML call ---------------------------------------------------------------------------------------

    def _call(self, slot: _GpuSlot, key: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
        """Call ``fn``; return (value, None) or (None, reason). Raise _GpuLost when the GPU is gone.

        NOT_SUPPORTED and FUNCTION_NOT_FOUND are remembered per GPU and key, so they are asked only once.
        """
        remembered = slot.unsupported.get(key)
        if remembered is not None:
            return None, remembered
        try:
            return fn(*args), None
        except Exception as exc:
            code = _nvml_code(exc)
            if code in (_GPU_IS_LOST, _RESET_REQUIRED):
                raise _GpuLost(*self._lost_reason(exc)) from exc
            if code == _NOT_SUPPORTED:
                slot.unsupported[key] = UNSUPPORTED
                return None, UNSUPPORTED
            # A missing symbol, or a struct version this driver predates: the call does not exist here.
            if code in (_FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH) or isinstance(exc, AttributeError):
                slot.unsupported[key] = NOT_IN_DRIVER
                return None, NOT_IN_DRIVER
            if code == _NO_PERMISSION:
                return None, NO_PERMISSION
            return None, f"error: {_text(exc)}"

    # -- the tick --------------------------------------------------------------------------------------------

    def read(self, slow: bool) -> tuple[list[Gpu], list[NvmlProcess]]:
        """One reading of every GPU. ``slow`` also refreshes process lists, per-process use and PCIe."""
        if not self._started:
            self.start()
        if not self.driver.ok:
            return [], []
        now = time.monotonic()
        gpus: list[Gpu] = []
        processes: list[NvmlProcess] = []
        self.notices = []
        for slot in self._slots:
            if slot.handle is None or slot.lost_reason is not None:
                if now < slot.retry_at:
                    gpus.append(self._lost_gpu(slot))
                    continue
                self._open(slot, now)
                if slot.handle is None:
                    gpus.append(self._lost_gpu(slot))
                    continue
            try:
                gpu = self._read_gpu(slot, slow)
            except _GpuLost as lost:
                slot.lost_state, slot.lost_reason = lost.state, lost.reason
                slot.retry_at = now + self.retry_lost_after_s
                slot.processes = []
                slot.process_notice = None
                self._drop_gpm(slot)
                gpus.append(self._lost_gpu(slot))
                continue
            gpus.append(gpu)
            processes.extend(slot.processes)
            if slot.process_notice is not None:
                self.notices.append(slot.process_notice)
        return gpus, processes

    def _lost_gpu(self, slot: _GpuSlot) -> Gpu:
        return Gpu(
            index=slot.index,
            uuid=slot.uuid,
            name=slot.name,
            state=slot.lost_state,
            reason=slot.lost_reason or "GPU unavailable",
        )

    def _read_gpu(self, slot: _GpuSlot, slow: bool) -> Gpu:
        h = slot.handle
        reasons: dict[str, str] = {}
        values: dict[str, Any] = {}

        def put(name: str, value: Any, reason: str | None) -> None:
            values[name] = value
            if reason is not None:
                reasons[name] = reason

        self._read_memory(slot, put)

        util, why = self._call(slot, "utilization", pynvml.nvmlDeviceGetUtilizationRates, h)
        put("utilization_gpu_percent", None if util is None else float(util.gpu), why)
        put("utilization_memory_percent", None if util is None else float(util.memory), why)

        temp, why = self._call(slot, "temperature", pynvml.nvmlDeviceGetTemperature, h, 0)
        put("temperature_c", None if temp is None else float(temp), why)
        power, why = self._call(slot, "power", pynvml.nvmlDeviceGetPowerUsage, h)
        put("power_w", None if power is None else power / 1000.0, why)
        fan, why = self._call(slot, "fan", pynvml.nvmlDeviceGetFanSpeed, h)
        put("fan_percent", None if fan is None else float(fan), why)
        pstate, why = self._call(slot, "pstate", pynvml.nvmlDeviceGetPerformanceState, h)
        if pstate == _PSTATE_UNKNOWN:
            pstate, why = None, UNSUPPORTED
        put("pstate", pstate, why)
        sm, why = self._call(slot, "clock_sm", pynvml.nvmlDeviceGetClockInfo, h, 1)
        put("clock_sm_mhz", sm, why)
        mem, why = self._call(slot, "clock_mem", pynvml.nvmlDeviceGetClockInfo, h, 2)
        put("clock_mem_mhz", mem, why)
        self._read_max_clocks(slot, put)
        self._read_clock_reasons(slot, put)
        self._read_gpm(slot, put)

        if slow or not slot.slow:
            self._read_slow(slot)
        for name, value in slot.slow.items():
            put(name, value, slot.slow_reasons.get(name))

        return Gpu(
            index=slot.index,
            uuid=slot.uuid,
            name=slot.name,
            state=GPU_OK,
            unavailable=frozen_reasons(reasons),
            **values,
        )

    def _read_memory(self, slot: _GpuSlot, put: Callable[[str, Any, str | None], None]) -> None:
        h = slot.handle
        if self._memory_v2 is not False:
            info, why = self._call(slot, "memory_v2", pynvml.nvmlDeviceGetMemoryInfo, h, _NVML_MEMORY_V2)
            if info is not None:
                self._memory_v2 = True
                put("memory_total_bytes", int(info.total), None)
                put("memory_used_bytes", int(info.used), None)
                put("memory_free_bytes", int(info.free), None)
                put("memory_reserved_bytes", int(info.reserved), None)
                return
            if why == NOT_IN_DRIVER:
                self._memory_v2 = False
        info, why = self._call(slot, "memory", pynvml.nvmlDeviceGetMemoryInfo, h)
        put("memory_total_bytes", None if info is None else int(info.total), why)
        put("memory_used_bytes", None if info is None else int(info.used), why)
        put("memory_free_bytes", None if info is None else int(info.free), why)
        put("memory_reserved_bytes", None, why or NOT_IN_DRIVER)

    def _read_max_clocks(self, slot: _GpuSlot, put: Callable[[str, Any, str | None], None]) -> None:
        """Maximum clocks never change while the driver runs: read them until both answer, then reuse."""
        if slot.max_clocks is not None:
            put("clock_sm_max_mhz", slot.max_clocks[0], None)
            put("clock_mem_max_mhz", slot.max_clocks[1], None)
            return
        sm, sm_why = self._call(slot, "max_clock_sm", pynvml.nvmlDeviceGetMaxClockInfo, slot.handle, 1)
        mem, mem_why = self._call(slot, "max_clock_mem", pynvml.nvmlDeviceGetMaxClockInfo, slot.handle, 2)
        if sm is not None and mem is not None:
            slot.max_clocks = (sm, mem)
        put("clock_sm_max_mhz", sm, sm_why)
        put("clock_mem_max_mhz", mem, mem_why)

    def _read_clock_reasons(self, slot: _GpuSlot, put: Callable[[str, Any, str | None], None]) -> None:
        names = (
            [self._reasons_fn]
            if self._reasons_fn
            else ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"]
        )
        why: str | None = NOT_IN_DRIVER
        for name in names:
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            mask, why = self._call(slot, name, fn, slot.handle)
            if mask is not None:
                self._reasons_fn = name
                put("throttle_reasons", decode_clock_reasons(int(mask)), None)
                return
            if why != NOT_IN_DRIVER:
                break
        put("throttle_reasons", None, why)

    def _read_gpm(self, slot: _GpuSlot, put: Callable[[str, Any, str | None], None]) -> None:
        """SM activity from GPM: a metric between this tick's sample and the previous one."""
        if slot.gpm_supported is None:
            slot.gpm_supported = self._gpm_supported(slot)
        if not slot.gpm_supported:
            put("sm_activity_percent", None, slot.unsupported.get("gpm", UNSUPPORTED))
            return
        try:
            sample = pynvml.nvmlGpmSampleAlloc()
        except Exception:
            slot.gpm_supported = False
            put("sm_activity_percent", None, UNSUPPORTED)
            return
        _taken, why = self._call(slot, "gpm_sample", pynvml.nvmlGpmSampleGet, slot.handle, sample)
        if why is not None:
            self._quiet(pynvml.nvmlGpmSampleFree, sample)
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
        request.metrics[0].metricId = _GPM_SM_UTIL
        result, why = self._call(slot, "gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
        self._quiet(pynvml.nvmlGpmSampleFree, previous)
        if result is None:
            put("sm_activity_percent", None, why)
        elif result.metrics[0].nvmlReturn != 0:
            put("sm_activity_percent", None, UNSUPPORTED)
        else:
            value = float(result.metrics[0].value)
            if math.isfinite(value):
                put("sm_activity_percent", round(value, 1), None)
            else:  # a double from the driver: NaN would make --json invalid and every comparison false
                put("sm_activity_percent", None, INVALID)

    def _gpm_supported(self, slot: _GpuSlot) -> bool:
        if not hasattr(pynvml, "nvmlGpmQueryDeviceSupport"):
            slot.unsupported["gpm"] = NOT_IN_DRIVER
            return False
        support, why = self._call(slot, "gpm", pynvml.nvmlGpmQueryDeviceSupport, slot.handle)
        if support is None:
            slot.unsupported["gpm"] = why or UNSUPPORTED
            return False
        if not support.isSupportedDevice:
            slot.unsupported["gpm"] = UNSUPPORTED
            return False
        return True

    def _drop_gpm(self, slot: _GpuSlot) -> None:
        if slot.gpm_sample is not None:
            self._quiet(pynvml.nvmlGpmSampleFree, slot.gpm_sample)
            slot.gpm_sample = None

    # -- slow cadence: power limit, PCIe, ECC, processes -----------------------------------------------------

    def _read_slow(self, slot: _GpuSlot) -> None:
        h = slot.handle
        values: dict[str, Any] = {}
        reasons: dict[str, str] = {}

        def put(name: str, value: Any, reason: str | None) -> None:
            values[name] = value
            if reason is not None:
                reasons[name] = reason

        limit, why = self._call(slot, "power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
        put("power_limit_w", None if limit is None else limit / 1000.0, why)
        rx, why = self._call(slot, "pcie_rx", pynvml.nvmlDeviceGetPcieThroughput, h, 1)
        put("pcie_rx_bytes_per_s", None if rx is None else int(rx) * _KIB, why)
        tx, why = self._call(slot, "pcie_tx", pynvml.nvmlDeviceGetPcieThroughput, h, 0)
        put("pcie_tx_bytes_per_s", None if tx is None else int(tx) * _KIB, why)
        ecc, why = self._call(slot, "ecc", pynvml.nvmlDeviceGetTotalEccErrors, h, 1, 0)
        put("ecc_uncorrected_volatile", ecc, why)
        slot.slow, slot.slow_reasons = values, reasons
        slot.processes = self._read_processes(slot)

    def _running(self, slot: _GpuSlot, kind: str) -> tuple[list[tuple[int, int | None]] | None, str | None]:
        """(pid, used memory) pairs of one kind, from the newest process call the driver exports."""
        base = "nvmlDeviceGetComputeRunningProcesses" if kind == COMPUTE else "nvmlDeviceGetGraphicsRunningProcesses"
        variants = [self._process_variant[kind]] if kind in self._process_variant else [3, 2, 1]
        why: str | None = NOT_IN_DRIVER
        for variant in variants:
            if variant == 1:
                fn: Callable[..., Any] | None = lambda h, base=base: self._running_v1(base, h)  # noqa: E731
            else:
                fn = getattr(pynvml, f"{base}_v{variant}", None)
            if fn is None:
                continue
            found, why = self._call(slot, f"{base}_v{variant}", fn, slot.handle)
            if found is not None:
                self._process_variant[kind] = variant
                return [(int(p.pid), p.usedGpuMemory) for p in found], None
            if why != NOT_IN_DRIVER:
                break
        return None, why

    @staticmethod
    def _running_v1(base: str, handle: Any) -> list[_V1ProcessInfo]:
        """The legacy unversioned call (v1 struct), which pynvml no longer wraps."""
        fn = pynvml._nvmlGetFunctionPointer(base)
        count = ctypes.c_uint(0)
        ret = fn(handle, ctypes.byref(count), None)
        if ret == 0:
            return []
        if ret != 7:  # NVML_ERROR_INSUFFICIENT_SIZE is the expected answer to a sizing call
            raise pynvml.NVMLError(ret)
        count.value = count.value * 2 + 5
        infos = (_V1ProcessInfo * count.value)()
        ret = fn(handle, ctypes.byref(count), infos)
        if ret != 0:
            raise pynvml.NVMLError(ret)
        result = list(infos[: count.value])
        for info in result:
            if info.usedGpuMemory == 2**64 - 1:
                info.usedGpuMemory = None
        return result

    def _read_processes(self, slot: _GpuSlot) -> list[NvmlProcess]:
        compute, compute_why = self._running(slot, COMPUTE)
        graphics, _ = self._running(slot, GRAPHICS)
        slot.process_notice = (
            f"GPU {slot.index}: no permission to list its processes (run as root to see them)"
            if compute is None and compute_why == NO_PERMISSION
            else None
        )
        kinds: dict[int, str] = {}
        memory: dict[int, int | None] = {}
        for kind, found in ((COMPUTE, compute or []), (GRAPHICS, graphics or [])):
            for pid, used in found:
                kinds[pid] = COMPUTE_GRAPHICS if kinds.get(pid, kind) != kind else kind
                if used is not None:
                    memory[pid] = max(memory.get(pid) or 0, int(used))
                else:
                    memory.setdefault(pid, None)
        samples, sample_why = self._read_process_samples(slot)
        result = []
        for pid in sorted(kinds):
            reasons: dict[str, str] = {}
            if memory[pid] is None:
                reasons["gpu_memory_bytes"] = UNSUPPORTED
            sample = samples.get(pid)
            if sample is None:
                reasons["sm_percent"] = reasons["memory_bandwidth_percent"] = sample_why or "no recent sample"
            result.append(
                NvmlProcess(
                    pid=pid,
                    gpu_index=slot.index,
                    kind=kinds[pid],
                    gpu_memory_bytes=memory[pid],
                    sm_percent=None if sample is None else sample[1],
                    memory_bandwidth_percent=None if sample is None else sample[2],
                    unavailable=reasons,
                )
            )
        return result

    def _read_process_samples(self, slot: _GpuSlot) -> tuple[dict[int, tuple[int, float, float]], str | None]:
        """Per-process SM and memory-bandwidth use, asking only for samples newer than the last one seen."""
        try:
            if "process_utilization" in slot.unsupported:
                return {}, slot.unsupported["process_utilization"]
            fresh = pynvml.nvmlDeviceGetProcessUtilization(slot.handle, slot.last_sample_us)
        except Exception as exc:
            code = _nvml_code(exc)
            if code == _NOT_FOUND:
                fresh = []  # no samples newer than the last one: nothing ran since, not an error
            elif code in (_GPU_IS_LOST, _RESET_REQUIRED):
                raise _GpuLost(*self._lost_reason(exc)) from exc
            elif code in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
                slot.unsupported["process_utilization"] = UNSUPPORTED if code == _NOT_SUPPORTED else NOT_IN_DRIVER
                return {}, slot.unsupported["process_utilization"]
            else:
                return {}, NO_PERMISSION if code == _NO_PERMISSION else f"error: {_text(exc)}"
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
        oldest_us = int((time.time() - self.sample_stale_s) * 1_000_000)
        slot.process_samples = {pid: s for pid, s in slot.process_samples.items() if s[0] >= oldest_us}
        return slot.process_samples, None
