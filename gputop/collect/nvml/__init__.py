"""NVML collector: GPUs and the processes on them, through pynvml.

Every NVML call goes through one wrapper (``errors.call``) that turns NVML's errors into a reason instead of an
exception, so one GPU or one unsupported field never costs the others. The collector is used from one thread only.

What differs between driver branches is handled by trying the newest form of a call first and remembering
which one the loaded driver really answered (``slot.Variants``):

- running processes: ``_v3`` → ``_v2`` → the legacy v1 symbol (v1 structs have no MIG ids): ``processes.py``;
- memory: ``nvmlDeviceGetMemoryInfo_v2`` (separates reserved memory) → v1 (``used`` includes reserved);
- clock reasons: ``nvmlDeviceGetCurrentClocksEventReasons`` (R535+) → ``...ThrottleReasons``: ``device.py``.

SM activity comes from GPM where the GPU has it (``gpm.py``). A GPU partitioned with MIG is read by ``mig.py``:
its instances, their processes (also for a caller who may not list the whole GPU's), GPM per instance.

Besides the collector, two questions are answered for a caller with an NVML session of its own (``gputop
doctor``), asked exactly as a tick asks them: ``process_list_access`` (may this user list each GPU's processes, and
if not why) and ``gpm_support`` (does a GPU have GPM, and if not why). With ``errors`` (``reason_of``: NVML's errors
in the words gputop shows) they are all such a caller needs: ``GpuSlot``, ``Variants`` and the reading modules
stay the collector's own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from gputop.collect.nvml import device, gpm, health, mig
from gputop.collect.nvml.device import CLOCK_EVENT_REASONS, cuda_version_text, decode_clock_reasons
from gputop.collect.nvml.errors import INIT_REASONS, NO_PYNVML, GpuLost, init_reason, lost_reason, text
from gputop.collect.nvml.gpm import gpm_support
from gputop.collect.nvml.listing import ProcessList, ProcessListAccess, list_processes, process_list_access
from gputop.collect.nvml.slot import GpuSlot, Variants
from gputop.model import (
    DRIVER_OK,
    DRIVER_UNAVAILABLE,
    GPU_OK,
    INVALID,
    UNSUPPORTED,
    DriverInfo,
    Gpu,
    GpuProcess,
    frozen_reasons,
)
from gputop.plausible import bounded

try:
    import pynvml
except ImportError:  # the dashboard still runs (host side only) where nvidia-ml-py is absent
    pynvml = None

__all__ = [
    "CLOCK_EVENT_REASONS",
    "INIT_REASONS",
    "NvmlCollector",
    "ProcessList",
    "ProcessListAccess",
    "cuda_version_text",
    "decode_clock_reasons",
    "gpm_support",
    "process_list_access",
]


class NvmlCollector:
    """Reads every GPU through NVML. Never raises; a failure becomes a reason on the value it concerns.

    Args:
        retry_lost_after_s: how long a lost GPU is left alone before its handle is fetched again.
        sample_stale_s: how old a per-process utilization sample may be and still be shown.
        watch_xids: count Xid events on a thread of their own. A single snapshot (``--once``) does not: its window
            is 0.12 s, and ending the thread waits for the driver's event wait to return (up to ``WAIT_MS``).
    """

    def __init__(self, retry_lost_after_s: float = 5.0, sample_stale_s: float = 10.0, watch_xids: bool = True) -> None:
        self.retry_lost_after_s = retry_lost_after_s
        self.sample_stale_s = sample_stale_s
        self.watch_xids = watch_xids
        self.driver = DriverInfo(status=DRIVER_UNAVAILABLE, reason="not started")
        self._slots: list[GpuSlot] = []
        self._started = False
        self._variants = Variants()
        self._xids: health.XidWatcher | None = None
        self.notices: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> DriverInfo:
        """Initialise NVML once and read the driver's identity. Safe to call again: it does nothing then."""
        if self._started:
            return self.driver
        self._started = True
        if pynvml is None:
            self.driver = DriverInfo(DRIVER_UNAVAILABLE, NO_PYNVML)
            return self.driver
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # pynvml raises NVMLError subclasses, and OSError from a broken library
            self.driver = DriverInfo(DRIVER_UNAVAILABLE, init_reason(exc))
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
                f"NVML could not count the GPUs: {text(exc)}",
                self.driver.driver_version,
                self.driver.cuda_version,
                self.driver.nvml_version,
            )
            return self.driver
        self._slots = [GpuSlot(index=i) for i in range(count)]
        for slot in self._slots:
            self._open(slot, time.monotonic())
        if self.watch_xids:
            self._xids = health.XidWatcher()
            self._xids.start(self._slots)
        return self.driver

    def close(self) -> None:
        """Free GPM samples and shut NVML down."""
        if not self._started or not self.driver.ok:
            return
        if self._xids is not None:
            self._xids.close()
        for slot in self._slots:
            gpm.drop(slot)
            mig.close(slot)
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        self._started = False

    @staticmethod
    def _system(fn: Callable[[], Any]) -> str | None:
        try:
            return text(fn())
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

    def _open(self, slot: GpuSlot, now: float) -> None:
        """Fetch the GPU's handle and its fixed facts; a failure marks the GPU lost until a later retry."""
        try:
            slot.handle = pynvml.nvmlDeviceGetHandleByIndex(slot.index)
        except Exception as exc:
            slot.handle = None
            slot.lost_state, slot.lost_reason = lost_reason(exc)
            slot.retry_at = now + self.retry_lost_after_s
            return
        slot.lost_reason = None
        if slot.name is None:
            slot.name = self._system(lambda: pynvml.nvmlDeviceGetName(slot.handle))
        if slot.uuid is None:
            slot.uuid = self._system(lambda: pynvml.nvmlDeviceGetUUID(slot.handle))

    # -- the tick --------------------------------------------------------------------------------------------

    def read(self, slow: bool) -> tuple[list[Gpu], list[GpuProcess]]:
        """One reading of every GPU. ``slow`` also refreshes process lists, per-process use and PCIe.

        The process rows carry NVML's side only: their ``host`` is None until the sampler joins it.
        """
        if not self._started:
            self.start()
        if not self.driver.ok:
            return [], []
        now = time.monotonic()
        gpus: list[Gpu] = []
        processes: list[GpuProcess] = []
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
            except GpuLost as lost:
                slot.lost_state, slot.lost_reason = lost.state, lost.reason
                slot.retry_at = now + self.retry_lost_after_s
                slot.processes = []
                slot.process_notice = None
                gpm.drop(slot)
                mig.close(slot)
                gpus.append(self._lost_gpu(slot))
                continue
            gpus.append(gpu)
            processes.extend(slot.processes)
            if slot.process_notice is not None:
                self.notices.append(slot.process_notice)
        return gpus, processes

    def _lost_gpu(self, slot: GpuSlot) -> Gpu:
        return Gpu(
            index=slot.index,
            uuid=slot.uuid,
            name=slot.name,
            state=slot.lost_state,
            reason=slot.lost_reason or "GPU unavailable",
            pci_bus_id=slot.pci_bus_id,
        )

    def _read_gpu(self, slot: GpuSlot, slow: bool) -> Gpu:
        reasons: dict[str, str] = {}
        values: dict[str, Any] = {}

        def put(name: str, value: Any, reason: str | None) -> None:
            values[name] = value
            if reason is not None:
                reasons[name] = reason

        device.read_fast(slot, self._variants, put)
        in_mig = mig.read_mode(slot, put)
        if in_mig:
            for name in gpm.FIELDS:
                put(name, None, UNSUPPORTED)  # per instance only
        else:
            gpm.read(slot, put)
        if slow or not slot.slow or (in_mig and not slot.mig_slots):
            device.read_slow(slot)
            slot.slow["health"] = health.read(slot, self._xids, slot.slow.get("ecc_uncorrected_volatile"))
            found = list_processes(slot, self._variants, in_mig, self.sample_stale_s)
            slot.processes = [bounded(process, INVALID) for process in found]
        for name, value in slot.slow.items():
            put(name, value, slot.slow_reasons.get(name))
        if in_mig:
            mig.no_utilization(reasons)
            values["mig"] = tuple(bounded(instance, INVALID) for instance in mig.read_instances(slot, self._variants))
        # A broken board or a vGPU host can answer anything (4294967295 °C): out of range is no reading.
        return bounded(
            Gpu(
                index=slot.index,
                uuid=slot.uuid,
                name=slot.name,
                state=GPU_OK,
                unavailable=frozen_reasons(reasons),
                **values,
            ),
            INVALID,
        )
