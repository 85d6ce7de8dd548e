"""Describe the fake GPUs and write them where the fake ``libnvidia-ml.so.1`` reads them.

The library reads the file named by the ``FAKE_NVML_STATE`` environment variable and re-reads it
whenever it changes, so a test builds a :class:`FakeState`, calls :func:`write_state`, exercises
the code under test, then edits the state and writes it again. The on-disk format is documented
in ``tests/fakenvml/README.md``; only this module should produce it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
from dataclasses import dataclass, field

STATE_ENV_VAR = "FAKE_NVML_STATE"

#: NVML error names accepted in ``errors`` and ``init_error`` (``NVML_ERROR_`` prefix dropped).
ERROR_NAMES = frozenset(
    {
        "UNINITIALIZED",
        "INVALID_ARGUMENT",
        "NOT_SUPPORTED",
        "NO_PERMISSION",
        "ALREADY_INITIALIZED",
        "NOT_FOUND",
        "INSUFFICIENT_SIZE",
        "INSUFFICIENT_POWER",
        "DRIVER_NOT_LOADED",
        "TIMEOUT",
        "IRQ_ISSUE",
        "LIBRARY_NOT_FOUND",
        "FUNCTION_NOT_FOUND",
        "CORRUPTED_INFOROM",
        "GPU_IS_LOST",
        "RESET_REQUIRED",
        "OPERATING_SYSTEM",
        "LIB_RM_VERSION_MISMATCH",
        "IN_USE",
        "MEMORY",
        "NO_DATA",
        "VGPU_ECC_NOT_SUPPORTED",
        "INSUFFICIENT_RESOURCES",
        "FREQ_NOT_SUPPORTED",
        "ARGUMENT_VERSION_MISMATCH",
        "DEPRECATED",
        "NOT_READY",
        "GPU_NOT_FOUND",
        "INVALID_STATE",
        "RESET_TYPE_NOT_SUPPORTED",
        "UNKNOWN",
    }
)

_FORMAT_VERSION = "1"
_MAX_TEXT_BYTES = 255  # the C side keeps strings in 256-byte buffers
_U32 = 2**32 - 1
_U64 = 2**64 - 1

#: What a process's ``used_memory`` holds when the driver cannot tell (WDDM, some containers, vGPU).
NVML_VALUE_NOT_AVAILABLE = _U64


@dataclass
class FakeProcess:
    """A process holding GPU memory, as listed by ``nvmlDevice*RunningProcesses``."""

    pid: int
    used_memory: int  # bytes
    kind: str = "compute"  # "compute" | "graphics"


@dataclass
class FakeSample:
    """One per-process utilization sample, as returned by ``nvmlDeviceGetProcessUtilization``."""

    pid: int
    timestamp_us: int
    sm: int
    mem: int
    enc: int = 0
    dec: int = 0


@dataclass
class FakeMigProcess:
    """A process on one MIG instance, listed on the instance's handle (and in the parent's aggregate list)."""

    pid: int
    used_memory: int  # bytes
    kind: str = "compute"  # "compute" | "graphics"


@dataclass
class FakeMigInstance:
    """One MIG device (a compute instance in a GPU instance) of a GPU whose ``mig_mode`` is on.

    ``slot`` is its index for ``nvmlDeviceGetMigDeviceHandleByIndex``; slots without an instance answer
    ``NOT_FOUND``. Its name on its handle is the parent's name, ``MIG`` and the profile, as real drivers give it.
    """

    slot: int
    gpu_instance_id: int
    compute_instance_id: int = 0
    profile: str = "3g.40gb"
    uuid: str = "MIG-00000000-0000-0000-0000-000000000000"
    multiprocessor_count: int = 60
    memory_total: int = 40_802_189_312
    memory_used: int = 0
    gpm_sm_util: float = 0.0
    gpm_any_tensor_util: float = 0.0
    processes: list[FakeMigProcess] = field(default_factory=list)


@dataclass
class FakeGpu:
    """One fake GPU; every field maps onto one NVML query (see the README's table)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total: int = 85_899_345_920
    memory_reserved: int = 536_870_912
    memory_used: int = 0  # allocated bytes (v2 meaning); free = total - reserved - used
    util_gpu: int = 0
    util_memory: int = 0
    temperature_c: int = 35
    power_mw: int = 70_000
    power_limit_mw: int = 700_000
    fan_percent: int = 0
    pstate: int = 0
    persistence_mode: int = 1  # nvmlDeviceGetPersistenceMode: 1 enabled, 0 disabled
    clock_sm_mhz: int = 1980
    clock_mem_mhz: int = 2619
    clock_sm_max_mhz: int = 1980
    clock_mem_max_mhz: int = 2619
    pcie_tx_kbps: int = 0
    pcie_rx_kbps: int = 0
    clocks_event_reasons: int = 0
    ecc_uncorrected_volatile: int = 0
    energy_mj: int = 2_895_481  # nvmlDeviceGetTotalEnergyConsumption; answered by Volta (5) and newer only
    gpm_supported: bool = True
    gpm_sm_util: float = 0.0
    gpm_sm_occupancy: float = 0.0
    gpm_dram_bw_util: float = 0.0
    ecc_mode: bool = True  # nvmlDeviceGetEccMode's current (and pending) mode
    pcie_link_gen: int = 5
    pcie_link_width: int = 16
    pcie_link_gen_max: int = 5
    pcie_link_width_max: int = 16
    processes: list[FakeProcess] = field(default_factory=list)
    samples: list[FakeSample] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # NVML function name, or "*" for every device call
    mig_supported: bool = True  # False: nvmlDeviceGetMigMode answers NOT_SUPPORTED
    mig_mode: bool = False
    mig_pending_mode: bool | None = None  # None: the same as mig_mode
    mig_max_devices: int = 7
    multiprocessor_count: int = 132
    gpm_any_tensor_util: float = 0.0
    # GPM's FP pipe activity (%) and PCIe/NVLink rates (MiB/s, as nvml.h gives them); negative: NOT_SUPPORTED
    gpm_fp64_util: float = 0.0
    gpm_fp32_util: float = 0.0
    gpm_fp16_util: float = 0.0
    gpm_pcie_tx_mib: float = 0.0
    gpm_pcie_rx_mib: float = 0.0
    gpm_nvlink_tx_mib: float = 0.0
    gpm_nvlink_rx_mib: float = 0.0
    mig: list[FakeMigInstance] = field(default_factory=list)
    architecture: int = 9  # nvmlDeviceGetArchitecture (R450+): 6 Turing, 7 Ampere, 8 Ada, 9 Hopper, 10 Blackwell
    # Health, as the captured H100 answered (tests/data/captures/h100-80gb-hbm3-r580-health.nvml.json): row
    # remapping on (Ampere and later data-centre GPUs), page retirement NOT_SUPPORTED (HBM GPUs remap rows instead;
    # Kepler to Volta Tesla/Quadro with ECC retire pages, and have no row remapping).
    row_remapping: bool = True
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remapped_pending: bool = False
    remapped_failed: bool = False
    page_retirement: bool = False
    retired_single_bit: int = 0
    retired_double_bit: int = 0
    retired_pending: bool = False
    pcie_replays: int = 0
    # nvmlDeviceGetViolationStatus, ns below application clocks per perf policy 0-5
    violation_power_ns: int = 0
    violation_thermal_ns: int = 0
    violation_sync_boost_ns: int = 0
    violation_board_limit_ns: int = 0
    violation_low_utilization_ns: int = 0
    violation_reliability_ns: int = 0
    event_types: int = 0xFF9F  # nvmlDeviceGetSupportedEventTypes on the captured H100
    xids: list[int] = field(default_factory=list)  # Xids that happened, oldest first: each is one event
    # nvmlDeviceGetPciInfo_v3: the bus id as nvidia-smi writes it; "" is 00000000:<0x18 + index>:00.0
    pci_bus_id: str = ""
    pci_device_id: int = 0x233010DE  # the captured H100's device and vendor id
    pci_subsystem_id: int = 0x16C110DE


@dataclass
class FakeState:
    """The whole fake system: its GPUs, versions and injected failures."""

    gpus: list[FakeGpu] = field(default_factory=list)
    driver_version: str | None = None  # None: the profile's default
    nvml_version: str | None = None
    cuda_version: int | None = None
    init_error: str | None = None  # e.g. "DRIVER_NOT_LOADED", "LIB_RM_VERSION_MISMATCH", "NO_PERMISSION"
    errors: dict[str, str] = field(default_factory=dict)  # system-level function name -> error name
    privileged: bool = True  # the caller is root: a MIG GPU's own process list holds every instance's processes
    mig_unprivileged_processes: str = "empty"  # what that list answers others: "empty", or an error name


# Fields of FakeGpu written as plain "key value" lines, with the widest value NVML can carry.
_TEXT_FIELDS = ("name", "uuid")
_FLOAT_FIELDS = (
    "gpm_sm_util",
    "gpm_sm_occupancy",
    "gpm_dram_bw_util",
    "gpm_any_tensor_util",
    "gpm_fp64_util",
    "gpm_fp32_util",
    "gpm_fp16_util",
    "gpm_pcie_tx_mib",
    "gpm_pcie_rx_mib",
    "gpm_nvlink_tx_mib",
    "gpm_nvlink_rx_mib",
)
_BOOL_FIELDS = (
    "gpm_supported",
    "ecc_mode",
    "mig_supported",
    "mig_mode",
    "row_remapping",
    "remapped_pending",
    "remapped_failed",
    "page_retirement",
    "retired_pending",
)
_U64_FIELDS = (
    "memory_total",
    "memory_reserved",
    "memory_used",
    "clocks_event_reasons",
    "ecc_uncorrected_volatile",
    "energy_mj",
    "violation_power_ns",
    "violation_thermal_ns",
    "violation_sync_boost_ns",
    "violation_board_limit_ns",
    "violation_low_utilization_ns",
    "violation_reliability_ns",
    "event_types",
)
_LIST_FIELDS = ("processes", "samples", "errors", "mig", "xids")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\n" in value or "\0" in value:
        raise ValueError(f"{what} must not contain a newline or NUL: {value!r}")
    if len(value.encode()) > _MAX_TEXT_BYTES:
        raise ValueError(f"{what} is longer than {_MAX_TEXT_BYTES} bytes: {value!r}")
    return value


def _word(value: object, what: str) -> str:
    text = _text(value, what)
    if not text or any(c.isspace() for c in text):
        raise ValueError(f"{what} must be a non-empty word without spaces: {value!r}")
    return text


def _pci_bus_id(value: object, what: str) -> str:
    text = _word(value, what)
    if not re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", text):
        raise ValueError(f"{what} must read DOMAIN:BUS:DEVICE.FUNCTION in hex: {value!r}")
    return text


def _uint(value: object, what: str, maximum: int) -> str:
    # bool is an int subclass; True where a count is expected is almost certainly a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{what} must be between 0 and {maximum}: {value}")
    return str(value)


def _float(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a float, not {type(value).__name__}")
    if math.isnan(value):
        return "nan"  # a driver's double can be NaN; the C side reads it back with strtod
    return repr(float(value))


def _error_name(value: object, what: str) -> str:
    name = _word(value, what)
    if name not in ERROR_NAMES:
        raise ValueError(f"{what}: unknown NVML error name {name!r} (expected e.g. 'NOT_SUPPORTED')")
    return name


def _error_lines(errors: dict[str, str], what: str) -> list[str]:
    return [
        f"error {_word(function, f'{what} key')} {_error_name(name, f'{what}[{function!r}]')}"
        for function, name in errors.items()
    ]


def _gpu_lines(index: int, gpu: FakeGpu) -> list[str]:
    where = f"gpus[{index}]"
    lines = ["gpu"]
    for f in dataclasses.fields(gpu):
        value = getattr(gpu, f.name)
        what = f"{where}.{f.name}"
        if f.name in _LIST_FIELDS:
            continue
        if f.name == "pci_bus_id":
            if value:
                lines.append(f"{f.name} {_pci_bus_id(value, what)}")
        elif f.name in _TEXT_FIELDS:
            lines.append(f"{f.name} {_text(value, what)}")
        elif f.name in _FLOAT_FIELDS:
            lines.append(f"{f.name} {_float(value, what)}")
        elif f.name in _BOOL_FIELDS or f.name == "mig_pending_mode":
            if f.name == "mig_pending_mode" and value is None:
                value = gpu.mig_mode
            if not isinstance(value, bool):
                raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
            lines.append(f"{f.name} {int(value)}")
        else:
            lines.append(f"{f.name} {_uint(value, what, _U64 if f.name in _U64_FIELDS else _U32)}")
    for i, p in enumerate(gpu.processes):
        what = f"{where}.processes[{i}]"
        if p.kind not in ("compute", "graphics"):
            raise ValueError(f"{what}.kind must be 'compute' or 'graphics': {p.kind!r}")
        pid = _uint(p.pid, what + ".pid", _U32)
        lines.append(f"process {pid} {_uint(p.used_memory, what + '.used_memory', _U64)} {p.kind}")
    for i, s in enumerate(gpu.samples):
        what = f"{where}.samples[{i}]"
        numbers = [
            _uint(s.pid, what + ".pid", _U32),
            _uint(s.timestamp_us, what + ".timestamp_us", _U64),
            *(_uint(getattr(s, k), f"{what}.{k}", _U32) for k in ("sm", "mem", "enc", "dec")),
        ]
        lines.append("sample " + " ".join(numbers))
    lines.extend(f"xid {_uint(x, f'{where}.xids[{i}]', _U32)}" for i, x in enumerate(gpu.xids))
    lines.extend(_error_lines(gpu.errors, f"{where}.errors"))
    lines.extend(_mig_lines(where, gpu))
    return lines


def _mig_lines(where: str, gpu: FakeGpu) -> list[str]:
    lines = []
    slots = set()
    for i, m in enumerate(gpu.mig):
        what = f"{where}.mig[{i}]"
        slot = _uint(m.slot, what + ".slot", 7)
        if m.slot in slots:
            raise ValueError(f"{what}.slot: slot {m.slot} is taken twice")
        slots.add(m.slot)
        name = _text(f"{gpu.name} MIG {_word(m.profile, what + '.profile')}", what + ".profile")
        numbers = [
            slot,
            _uint(m.gpu_instance_id, what + ".gpu_instance_id", _U32),
            _uint(m.compute_instance_id, what + ".compute_instance_id", _U32),
            _uint(m.multiprocessor_count, what + ".multiprocessor_count", _U32),
            _uint(m.memory_total, what + ".memory_total", _U64),
            _uint(m.memory_used, what + ".memory_used", _U64),
            _float(m.gpm_sm_util, what + ".gpm_sm_util"),
            _float(m.gpm_any_tensor_util, what + ".gpm_any_tensor_util"),
            _word(m.uuid, what + ".uuid"),
        ]
        lines.append("mig " + " ".join(numbers) + " " + name)
        for k, p in enumerate(m.processes):
            pwhat = f"{what}.processes[{k}]"
            if p.kind not in ("compute", "graphics"):
                raise ValueError(f"{pwhat}.kind must be 'compute' or 'graphics': {p.kind!r}")
            pid = _uint(p.pid, pwhat + ".pid", _U32)
            used = _uint(p.used_memory, pwhat + ".used_memory", _U64)
            lines.append(f"mig_process {slot} {pid} {used} {p.kind}")
    return lines


def render_state(state: FakeState) -> str:
    """Serialise ``state`` to the line format the C library parses.

    Args:
        state: The state to serialise.

    Returns:
        The file contents.

    Raises:
        TypeError: A field has the wrong type.
        ValueError: A value cannot be represented (newline in a name, unknown error name, ...).
    """
    lines = [f"fakenvml {_FORMAT_VERSION}"]
    if state.driver_version is not None:
        lines.append(f"driver_version {_text(state.driver_version, 'driver_version')}")
    if state.nvml_version is not None:
        lines.append(f"nvml_version {_text(state.nvml_version, 'nvml_version')}")
    if state.cuda_version is not None:
        lines.append(f"cuda_version {_uint(state.cuda_version, 'cuda_version', 2**31 - 1)}")
    if state.init_error is not None:
        lines.append(f"init_error {_error_name(state.init_error, 'init_error')}")
    lines.extend(_error_lines(state.errors, "errors"))
    if not isinstance(state.privileged, bool):
        raise TypeError(f"privileged must be a bool, not {type(state.privileged).__name__}")
    if not state.privileged:
        lines.append("privileged 0")
    if state.mig_unprivileged_processes != "empty":
        answer = _error_name(state.mig_unprivileged_processes, "mig_unprivileged_processes")
        lines.append(f"mig_unprivileged_processes {answer}")
    for index, gpu in enumerate(state.gpus):
        lines.extend(_gpu_lines(index, gpu))
    return "\n".join(lines) + "\n"


def write_state(path: str | os.PathLike, state: FakeState) -> None:
    """Write atomically: temp file in the same dir + os.replace.

    The library may read the file at any moment from another thread or process; the rename
    guarantees it sees either the old or the new state, never half of one.

    Args:
        path: Where to write; normally the value of ``$FAKE_NVML_STATE``.
        state: The state to write.

    Raises:
        TypeError: A field has the wrong type.
        ValueError: A value cannot be represented.
    """
    text = render_state(state)  # validate before touching the file system
    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".fakenvml-", suffix=".tmp", dir=os.path.dirname(target) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
