"""A real ``nvidia-smi -q -x`` capture as the fake driver's state, and as the values gputop must show for it.

``read_capture`` parses one capture (any schema from v10, R430, to v13, R590+) into what each NVML call answered
on that machine: one ``CapturedGpu`` per ``<gpu>`` whose ``values`` are keyed by gputop's JSON keys, ``None``
where nvidia-smi printed ``N/A``, ``[N/A]``, ``Not Supported`` or ``[Not Supported]``. ``fake_state`` turns it into
a ``FakeState`` in which every such value is the matching NVML error for its call (``NOT_SUPPORTED``; a process's
unknown memory is ``NVML_VALUE_NOT_AVAILABLE``), never a zero, and ``profile_for`` picks the fake's symbol profile
from the captured driver branch.

Units: nvidia-smi prints memory in MiB, so byte values are whole MiB (NVML's exact bytes lie within 1 MiB of
them); power in W with two decimals, which NVML had in mW; PCIe throughput in "KB/s", NVML's KiB/s.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakenvml.state import NVML_VALUE_NOT_AVAILABLE, FakeGpu, FakeMigInstance, FakeProcess, FakeState

MIB = 1024**2
KIB = 1024
MISSING = frozenset({"N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error", "Not Found", ""})
"""What nvidia-smi prints for a value its NVML call did not give."""

# nvidia-smi's clock-event (throttle) reason names, without their prefix, and gputop's names (nvml.h bits).
REASONS = {
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "display_clocks_setting": "display_clock_setting",
}
REASON_BITS = {name: 1 << i for i, name in enumerate(REASONS.values())}
ARCHITECTURES = {
    "Kepler": 2,
    "Maxwell": 3,
    "Pascal": 4,
    "Volta": 5,
    "Turing": 6,
    "Ampere": 7,
    "Ada Lovelace": 8,
    "Hopper": 9,
    "Blackwell": 10,
}
"""nvidia-smi's product_architecture as nvmlDeviceGetArchitecture answers it (nvml.h's NVML_DEVICE_ARCH_*)."""

# Which NVML calls fail when a value is N/A, keyed by gputop's JSON key. Keys sharing a call (RX and TX, SM and
# memory clocks) must be N/A together: the fake fails a call, not one of its arguments.
CALLS: dict[str, tuple[str, ...]] = {
    "utilization_gpu_percent": ("nvmlDeviceGetUtilizationRates",),
    "utilization_memory_percent": ("nvmlDeviceGetUtilizationRates",),
    "temperature_c": ("nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"),
    "power_w": ("nvmlDeviceGetPowerUsage",),
    "power_limit_w": ("nvmlDeviceGetEnforcedPowerLimit",),
    "fan_percent": ("nvmlDeviceGetFanSpeed",),
    "pstate": ("nvmlDeviceGetPerformanceState",),
    "clock_sm_mhz": ("nvmlDeviceGetClockInfo",),
    "clock_mem_mhz": ("nvmlDeviceGetClockInfo",),
    "clock_sm_max_mhz": ("nvmlDeviceGetMaxClockInfo",),
    "clock_mem_max_mhz": ("nvmlDeviceGetMaxClockInfo",),
    "pcie_rx_bytes_per_s": ("nvmlDeviceGetPcieThroughput",),
    "pcie_tx_bytes_per_s": ("nvmlDeviceGetPcieThroughput",),
    "throttle_reasons": ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
    "ecc_uncorrected_volatile": ("nvmlDeviceGetTotalEccErrors",),
    "ecc_enabled": ("nvmlDeviceGetEccMode",),
    "pcie_link_gen": ("nvmlDeviceGetCurrPcieLinkGeneration",),
    "pcie_link_width": ("nvmlDeviceGetCurrPcieLinkWidth",),
    "pcie_link_gen_max": ("nvmlDeviceGetMaxPcieLinkGeneration",),
    "pcie_link_width_max": ("nvmlDeviceGetMaxPcieLinkWidth",),
}

# Profiles by the first driver branch that has their symbol set (tests/fakenvml/README.md).
PROFILE_FLOORS = ((580, "r580"), (550, "r550"), (535, "r535"), (510, "r515"), (450, "r470"), (0, "r430"))


class CaptureError(ValueError):
    """The capture holds something the fake cannot serve as captured."""


@dataclass
class CapturedProcess:
    gpu_index: int
    pid: int
    kind: str  # "compute", "graphics" or "compute+graphics", as gputop names them
    used_bytes: int | None  # None: nvidia-smi printed N/A


@dataclass
class CapturedGpu:
    values: dict[str, Any]  # gputop JSON key -> value; None where the capture says N/A
    architecture: str | None = None
    row_remapping: bool = False  # <remapped_rows> has counts (not N/A): the GPU answers nvmlDeviceGetRemappedRows
    page_retirement: bool = False  # <retired_pages> has counts: it answers nvmlDeviceGetRetiredPages
    pcie_replays: int | None = None  # <pci><replay_counter>
    retired_pages: tuple[int, int] = (0, 0)  # single-bit, double-bit <retired_count>
    health: dict[str, Any] = field(default_factory=dict)  # gputop's health JSON key -> value; None where N/A


@dataclass
class Capture:
    path: Path
    driver_version: str
    cuda_version: str | None  # "12.2", or None where nvidia-smi printed "Not Found"
    gpus: list[CapturedGpu] = field(default_factory=list)
    processes: list[CapturedProcess] = field(default_factory=list)

    @property
    def branch(self) -> int:
        return int(self.driver_version.split(".")[0])

    @property
    def profile(self) -> str:
        return profile_for(self.driver_version)


def profile_for(driver_version: str) -> str:
    """The fake's profile for a driver version: the newest whose symbol set that branch already had."""
    branch = int(driver_version.split(".")[0])
    return next(name for floor, name in PROFILE_FLOORS if branch >= floor)


def _text(gpu: ET.Element, *paths: str) -> str | None:
    """The first of ``paths`` present, stripped; None when absent or N/A."""
    for path in paths:
        node = gpu.find(path)
        if node is not None:
            value = (node.text or "").strip()
            return None if value in MISSING else value
    return None


def _present(gpu: ET.Element, *paths: str) -> bool:
    return any(gpu.find(p) is not None for p in paths)


def _number(text: str | None, unit: str) -> float | None:
    if text is None:
        return None
    match = re.fullmatch(rf"(-?[0-9.]+)\s*{re.escape(unit)}", text)
    if match is None:
        raise CaptureError(f"expected a number in {unit!r}: {text!r}")
    return float(match.group(1))


def _int(text: str | None, unit: str = "") -> int | None:
    value = _number(text, unit) if unit else (None if text is None else float(text))
    return None if value is None else round(value)


def _mib(gpu: ET.Element, path: str) -> int | None:
    value = _int(_text(gpu, path), "MiB")
    return None if value is None else value * MIB


def _reasons(gpu: ET.Element) -> list[str] | None:
    section = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if section is None:
        section, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if section is None:
        return None
    active = set()
    for child in section:
        name = child.tag.removeprefix(prefix)
        if (child.text or "").strip() == "Active":
            if name not in REASONS:
                raise CaptureError(f"unknown clock event reason {child.tag!r} is active")
            active.add(REASONS[name])
    return [name for name in REASONS.values() if name in active]


def _ecc_errors(gpu: ET.Element) -> int | None:
    """Uncorrected volatile ECC errors: v10/v11 ``double_bit/total``, v12 ``dram``+``sram_uncorrectable``, R580's
    SRAM split into parity and SECDED."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    parts = [
        "double_bit/total",
        "dram_uncorrectable",
        "sram_uncorrectable",
        "sram_uncorrectable_parity",
        "sram_uncorrectable_secded",
    ]
    found = [_text(volatile, p) for p in parts if volatile.find(p) is not None]
    numbers = [int(v) for v in found if v is not None]
    return sum(numbers) if numbers else None


def _gpu(gpu: ET.Element) -> CapturedGpu:
    link = "pci/pci_gpu_link_info/"
    ecc_mode = _text(gpu, "ecc_mode/current_ecc")
    pstate = _text(gpu, "performance_state")
    values: dict[str, Any] = {
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "memory_total_bytes": _mib(gpu, "fb_memory_usage/total"),
        "memory_reserved_bytes": _mib(gpu, "fb_memory_usage/reserved"),
        "memory_used_bytes": _mib(gpu, "fb_memory_usage/used"),
        "memory_free_bytes": _mib(gpu, "fb_memory_usage/free"),
        "utilization_gpu_percent": _number(_text(gpu, "utilization/gpu_util"), "%"),
        "utilization_memory_percent": _number(_text(gpu, "utilization/memory_util"), "%"),
        "temperature_c": _number(_text(gpu, "temperature/gpu_temp"), "C"),
        # nvmlDeviceGetPowerUsage: the 1 s average where the driver prints both (R570+), else the one draw.
        "power_w": _number(
            _text(
                gpu,
                "gpu_power_readings/average_power_draw",
                "gpu_power_readings/power_draw",
                "power_readings/power_draw",
            ),
            "W",
        ),
        "power_limit_w": _number(
            _text(gpu, "gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit"), "W"
        ),
        "fan_percent": _number(_text(gpu, "fan_speed"), "%"),
        "pstate": None if pstate is None else int(pstate.removeprefix("P")),
        "clock_sm_mhz": _int(_text(gpu, "clocks/sm_clock"), "MHz"),
        "clock_mem_mhz": _int(_text(gpu, "clocks/mem_clock"), "MHz"),
        "clock_sm_max_mhz": _int(_text(gpu, "max_clocks/sm_clock"), "MHz"),
        "clock_mem_max_mhz": _int(_text(gpu, "max_clocks/mem_clock"), "MHz"),
        "pcie_rx_bytes_per_s": _kib(_text(gpu, "pci/rx_util")),
        "pcie_tx_bytes_per_s": _kib(_text(gpu, "pci/tx_util")),
        "throttle_reasons": _reasons(gpu),
        "ecc_uncorrected_volatile": _ecc_errors(gpu),
        "ecc_enabled": None if ecc_mode is None else ecc_mode == "Enabled",
        "pcie_link_gen": _int(_text(gpu, link + "pcie_gen/current_link_gen")),
        "pcie_link_width": _int(_text(gpu, link + "link_widths/current_link_width"), "x"),
        "pcie_link_gen_max": _int(_text(gpu, link + "pcie_gen/max_link_gen")),
        "pcie_link_width_max": _int(_text(gpu, link + "link_widths/max_link_width"), "x"),
        "mig_mode": _mig_mode(gpu),
        "mig": _mig_devices(gpu),
        "pci_bus_id": _text(gpu, "pci/pci_bus_id"),
    }
    if values["memory_total_bytes"] is None or values["memory_used_bytes"] is None:
        raise CaptureError("the fake cannot serve a GPU whose memory is N/A")
    return CapturedGpu(
        values=values,
        architecture=_text(gpu, "product_architecture"),
        row_remapping=_int(_text(gpu, "remapped_rows/remapped_row_corr")) is not None,
        page_retirement=_int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")) is not None,
        pcie_replays=_int(_text(gpu, "pci/replay_counter")),
        retired_pages=(
            _int(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")) or 0,
            _int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")) or 0,
        ),
        health=_health(gpu),
    )


def _yes(text: str | None) -> bool | None:
    return None if text is None else text == "Yes"


def _health(gpu: ET.Element) -> dict[str, Any]:
    """What the capture shows of the GPU's health, under the names of gputop's ``health`` object."""
    retired = "retired_pages/"
    return {
        "remapped_rows_correctable": _int(_text(gpu, "remapped_rows/remapped_row_corr")),
        "remapped_rows_uncorrectable": _int(_text(gpu, "remapped_rows/remapped_row_unc")),
        "remapped_rows_pending": _yes(_text(gpu, "remapped_rows/remapped_row_pending")),
        "remapped_rows_failed": _yes(_text(gpu, "remapped_rows/remapped_row_failure")),
        "retired_pages_single_bit": _int(_text(gpu, retired + "multiple_single_bit_retirement/retired_count")),
        "retired_pages_double_bit": _int(_text(gpu, retired + "double_bit_retirement/retired_count")),
        # R430's nvidia-smi names it pending_blacklist only; both are nvmlDeviceGetRetiredPagesPendingStatus
        "retired_pages_pending": _yes(_text(gpu, retired + "pending_retirement", retired + "pending_blacklist")),
        "pcie_replays": _int(_text(gpu, "pci/replay_counter")),
    }


def _mig_mode(gpu: ET.Element) -> str | None:
    """``enabled``/``disabled`` as gputop names them; None where the GPU has no MIG (N/A) or the driver predates
    it (no ``mig_mode`` element before R450)."""
    mode = _text(gpu, "mig_mode/current_mig")
    return None if mode is None else mode.lower()


def _mig_devices(gpu: ET.Element) -> list[dict[str, Any]]:
    """What nvidia-smi shows of each MIG device, by gputop's JSON keys (``gpus[].mig[]``). nvidia-smi's XML
    names no profile and no MIG UUID, so neither is compared."""
    devices = []
    for device in gpu.findall("mig_devices/mig_device"):
        devices.append(
            {
                "index": _int(_text(device, "index")),
                "gpu_instance_id": _int(_text(device, "gpu_instance_id")),
                "compute_instance_id": _int(_text(device, "compute_instance_id")),
                "multiprocessor_count": _int(_text(device, "device_attributes/shared/multiprocessor_count")),
                "memory_total_bytes": _mib(device, "fb_memory_usage/total"),
                "memory_used_bytes": _mib(device, "fb_memory_usage/used"),
            }
        )
    return devices


def _fake_mig(device: dict[str, Any], parent_uuid: str) -> FakeMigInstance:
    """A MIG device for the fake. Its profile and UUID are the fake's own (the capture has neither): a profile
    named after its memory, and a UUID made from the parent's and the slot."""
    gib = round(device["memory_total_bytes"] / 1024**3)
    return FakeMigInstance(
        slot=device["index"],
        gpu_instance_id=device["gpu_instance_id"],
        compute_instance_id=device["compute_instance_id"],
        profile=f"fake.{gib}gb",
        uuid=f"MIG-{parent_uuid.removeprefix('GPU-')[:-2]}{device['index']:02x}",
        multiprocessor_count=device["multiprocessor_count"],
        memory_total=device["memory_total_bytes"],
        memory_used=device["memory_used_bytes"],
    )


def _kib(text: str | None) -> int | None:
    value = _int(text, "KB/s")
    return None if value is None else value * KIB


def _processes(index: int, gpu: ET.Element) -> list[CapturedProcess]:
    kinds = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}
    found = []
    for info in gpu.findall("processes/process_info"):
        kind = _text(info, "type")
        pid = _text(info, "pid")
        if pid is None or kind not in kinds:
            raise CaptureError(f"GPU {index}: process without a PID or with an unknown type {kind!r}")
        used = _int(_text(info, "used_memory"), "MiB")
        found.append(CapturedProcess(index, int(pid), kinds[kind], None if used is None else used * MIB))
    return found


def read_capture(path: Path) -> Capture:
    """Parse one ``nvidia-smi -q -x`` document."""
    root = ET.parse(path).getroot()
    driver = root.findtext("driver_version")
    if driver is None:
        raise CaptureError(f"{path.name}: no driver_version")
    cuda = (root.findtext("cuda_version") or "").strip()
    capture = Capture(path, driver.strip(), None if cuda in MISSING else cuda)
    for index, gpu in enumerate(root.findall("gpu")):
        capture.gpus.append(_gpu(gpu))
        capture.processes.extend(_processes(index, gpu))
    return capture


def _cuda_int(version: str) -> int:
    major, minor = version.split(".")[:2]
    return int(major) * 1000 + int(minor) * 10


def _fake_gpu(gpu: CapturedGpu) -> FakeGpu:
    v = gpu.values
    errors: dict[str, str] = {}
    for key, calls in CALLS.items():
        if v[key] is None:
            errors.update(dict.fromkeys(calls, "NOT_SUPPORTED"))
    for a, b in (
        ("clock_sm_mhz", "clock_mem_mhz"),
        ("clock_sm_max_mhz", "clock_mem_max_mhz"),
        ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"),
        ("utilization_gpu_percent", "utilization_memory_percent"),
    ):
        if (v[a] is None) != (v[b] is None):
            raise CaptureError(f"{a} and {b} come from one NVML call; the fake cannot fail only one")

    def num(key: str, scale: float = 1) -> int:
        return 0 if v[key] is None else round(v[key] * scale)  # the call fails: the number is never read

    reasons = v["throttle_reasons"] or []
    return FakeGpu(
        name=v["name"],
        uuid=v["uuid"],
        memory_total=v["memory_total_bytes"],
        memory_reserved=v["memory_reserved_bytes"] or 0,
        memory_used=v["memory_used_bytes"],
        util_gpu=num("utilization_gpu_percent"),
        util_memory=num("utilization_memory_percent"),
        temperature_c=num("temperature_c"),
        power_mw=num("power_w", 1000),
        power_limit_mw=num("power_limit_w", 1000),
        fan_percent=num("fan_percent"),
        pstate=num("pstate"),
        clock_sm_mhz=num("clock_sm_mhz"),
        clock_mem_mhz=num("clock_mem_mhz"),
        clock_sm_max_mhz=num("clock_sm_max_mhz"),
        clock_mem_max_mhz=num("clock_mem_max_mhz"),
        pcie_rx_kbps=num("pcie_rx_bytes_per_s", 1 / KIB),
        pcie_tx_kbps=num("pcie_tx_bytes_per_s", 1 / KIB),
        clocks_event_reasons=sum(REASON_BITS[r] for r in reasons),
        ecc_uncorrected_volatile=num("ecc_uncorrected_volatile"),
        ecc_mode=bool(v["ecc_enabled"]),
        pcie_link_gen=num("pcie_link_gen"),
        pcie_link_width=num("pcie_link_width"),
        pcie_link_gen_max=num("pcie_link_gen_max"),
        pcie_link_width_max=num("pcie_link_width_max"),
        gpm_supported=gpu.architecture in ("Hopper", "Blackwell"),
        architecture=ARCHITECTURES.get(gpu.architecture or "", 0xFFFFFFFF),
        mig_supported=v["mig_mode"] is not None,
        mig_mode=v["mig_mode"] == "enabled",
        mig=[_fake_mig(d, v["uuid"]) for d in v["mig"]],
        row_remapping=gpu.row_remapping,
        page_retirement=gpu.page_retirement,
        pcie_replays=gpu.pcie_replays or 0,
        retired_single_bit=gpu.retired_pages[0],
        retired_double_bit=gpu.retired_pages[1],
        remapped_correctable=gpu.health["remapped_rows_correctable"] or 0,
        remapped_uncorrectable=gpu.health["remapped_rows_uncorrectable"] or 0,
        remapped_pending=bool(gpu.health["remapped_rows_pending"]),
        remapped_failed=bool(gpu.health["remapped_rows_failed"]),
        retired_pending=bool(gpu.health["retired_pages_pending"]),
        pci_bus_id=v["pci_bus_id"] or "",
        errors=errors,
    )


def fake_state(capture: Capture, pids: Mapping[int, int] | None = None) -> FakeState:
    """The fake driver's state for ``capture``, its process PIDs replaced through ``pids`` (captured -> real)."""
    state = FakeState(
        driver_version=capture.driver_version,
        cuda_version=None if capture.cuda_version is None else _cuda_int(capture.cuda_version),
        gpus=[_fake_gpu(g) for g in capture.gpus],
    )
    if capture.cuda_version is None:
        state.errors = dict.fromkeys(
            ("nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"), "NOT_FOUND"
        )
    for p in capture.processes:
        pid = p.pid if pids is None else pids[p.pid]
        used = NVML_VALUE_NOT_AVAILABLE if p.used_bytes is None else p.used_bytes
        for kind in ("compute", "graphics"):
            if kind in p.kind:
                state.gpus[p.gpu_index].processes.append(FakeProcess(pid, used, kind))
    return state
