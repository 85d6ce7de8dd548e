"""The snapshot data model: what every consumer of gputop reads.

Pure data. Nothing here does I/O or imports pynvml, psutil, textual or torch, so the dashboard, the outputs,
the recorder and the advisor can all be tested with plain values.

A value that could not be read is ``None`` and its field name maps to a reason in the owner's ``unavailable``
mapping (for example ``{"fan_percent": "unsupported"}``). Zero always means a measured zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# Reasons a value is missing. Shown to users, so they are short and plain.
UNSUPPORTED = "unsupported"
NO_PERMISSION = "no permission"
GPU_LOST = "gpu lost"
NOT_IN_DRIVER = "not in this driver"
PROCESS_EXITED = "process exited"
NOT_VISIBLE = "not in this PID namespace"
ACCESS_DENIED = "access denied"
ZOMBIE = "zombie"
MEASURING = "measuring"

DRIVER_OK = "ok"
DRIVER_UNAVAILABLE = "unavailable"

GPU_OK = "ok"
GPU_LOST_STATE = "lost"
GPU_ERROR = "error"

COMPUTE = "compute"
GRAPHICS = "graphics"
COMPUTE_GRAPHICS = "compute+graphics"

_EMPTY: Mapping[str, str] = MappingProxyType({})


def frozen_reasons(reasons: Mapping[str, str] | None) -> Mapping[str, str]:
    """Return a read-only copy of a field-to-reason mapping (shared empty one when there is nothing)."""
    return MappingProxyType(dict(reasons)) if reasons else _EMPTY


@dataclass(frozen=True, slots=True)
class HostInfo:
    """The machine the monitor runs on."""

    hostname: str
    cpu_percent: float | None
    cpu_percent_per_core: tuple[float, ...]
    cpu_count: int
    usable_cpu_count: int
    load_average: tuple[float, float, float] | None
    memory_total_bytes: int
    memory_used_bytes: int
    memory_available_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """Whether NVML answered, and which driver, CUDA and NVML versions it reported."""

    status: str
    reason: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    nvml_version: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == DRIVER_OK


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU at one moment.

    ``utilization_gpu_percent`` is NVML's ``utilization.gpu``: the share of the sample period in which any kernel
    ran, not how many SMs were busy. ``sm_activity_percent`` is the real SM activity from NVML GPM, where the GPU
    offers it (Hopper and newer).
    """

    index: int
    uuid: str | None
    name: str | None
    state: str = GPU_OK
    reason: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_gpu_percent: float | None = None
    utilization_memory_percent: float | None = None
    sm_activity_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_percent: float | None = None
    pstate: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    pcie_rx_bytes_per_s: int | None = None
    pcie_tx_bytes_per_s: int | None = None
    throttle_reasons: tuple[str, ...] | None = None
    ecc_uncorrected_volatile: int | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def memory_used_fraction(self) -> float | None:
        if not self.memory_total_bytes or self.memory_used_bytes is None:
            return None
        return self.memory_used_bytes / self.memory_total_bytes


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process that holds a context on one GPU, with its host-side view.

    A process on two GPUs appears twice, once per GPU, as in nvidia-smi. Its parents, children and threads are
    in the snapshot's ``host_processes``.
    """

    pid: int
    gpu_index: int
    kind: str
    gpu_memory_bytes: int | None = None
    sm_percent: float | None = None
    memory_bandwidth_percent: float | None = None
    visible: bool = True
    user: str | None = None
    name: str | None = None
    command: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    status: str | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class HostProcess:
    """A host process that gputop watches: a GPU process, one of its ancestors or descendants, or the focus.

    DataLoader workers are descendants of the training process named ``pt_data_worker``.
    """

    pid: int
    ppid: int | None = None
    visible: bool = True
    user: str | None = None
    name: str | None = None
    command: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    status: str | None = None
    num_threads: int | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything gputop knows at one tick. Immutable: consumers share it freely across threads."""

    time: float
    host: HostInfo
    driver: DriverInfo
    gpus: tuple[Gpu, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    host_processes: tuple[HostProcess, ...] = ()
    focus_pid: int | None = None
    notices: tuple[str, ...] = ()

    def host_process(self, pid: int) -> HostProcess | None:
        """The host side of a watched PID, if the snapshot has it."""
        for proc in self.host_processes:
            if proc.pid == pid:
                return proc
        return None
