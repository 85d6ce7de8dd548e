"""One GPU's own readings: memory, use, temperature, power, energy, clocks and their throttle reasons, PCIe, ECC.

Each reading goes through ``errors.call``, so one field the GPU lacks costs only that field. NVML's enum values
(clock types, sensors, counters) are pynvml's named constants; the clock-event bits are spelled out below, since
decoding a mask needs no driver.
"""

from __future__ import annotations

import re
import time
from typing import Any

from gputop.collect.nvml.errors import call
from gputop.collect.nvml.slot import GpuSlot, Put, Variants
from gputop.model import INVALID, NOT_IN_DRIVER, PCI_BUS_ID_FORM, UNSUPPORTED, ThrottleReason

try:
    import pynvml
except ImportError:
    pynvml = None

KIB = 1024
"""NVML's PCIe throughput is in KiB/s."""
MILLI = 1000.0
"""NVML's power readings are in milliwatts, its energy counter in millijoules."""
PCIE_THROUGHPUT_REUSE_S = 1.0
"""How long a PCIe throughput reading is reused. The driver samples the bus for 20 ms per call (two calls per GPU;
measured on an H100 with R580), so ``--once``, whose two readings are 0.12 s apart, pays for it once, not twice."""
TEMPERATURE_FUNCTIONS = ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature")
"""Newest first: the versioned call (R555+) and the one it deprecates (which pynvml says CUDA 14 removes)."""

# nvmlClocksEventReason* bits (nvml.h) and the model's names for them.
CLOCK_EVENT_REASONS: tuple[tuple[int, ThrottleReason], ...] = (
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


def decode_clock_reasons(mask: int) -> tuple[ThrottleReason, ...]:
    """Names of the active clock-event (throttle) reasons in an NVML bitmask."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)


def cuda_version_text(version: int) -> str:
    """NVML's integer CUDA driver version (12040) as users write it (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}"


def read_fast(slot: GpuSlot, variants: Variants, put: Put) -> None:
    """Everything read every tick, GPM aside."""
    h = slot.handle
    read_memory(slot, variants, put)
    util, why = call(slot.unsupported, "utilization", pynvml.nvmlDeviceGetUtilizationRates, h)
    put("utilization_gpu_percent", None if util is None else float(util.gpu), why)
    put("utilization_memory_percent", None if util is None else float(util.memory), why)
    read_temperature(slot, variants, put)
    power, why = call(slot.unsupported, "power", pynvml.nvmlDeviceGetPowerUsage, h)
    put("power_w", None if power is None else power / MILLI, why)
    fan, why = call(slot.unsupported, "fan", pynvml.nvmlDeviceGetFanSpeed, h)
    put("fan_percent", None if fan is None else float(fan), why)
    pstate, why = call(slot.unsupported, "pstate", pynvml.nvmlDeviceGetPerformanceState, h)
    if pstate == pynvml.NVML_PSTATE_UNKNOWN:
        pstate, why = None, UNSUPPORTED
    put("pstate", pstate, why)
    sm, why = call(slot.unsupported, "clock_sm", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
    put("clock_sm_mhz", sm, why)
    mem, why = call(slot.unsupported, "clock_mem", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM)
    put("clock_mem_mhz", mem, why)
    read_max_clocks(slot, put)
    read_clock_reasons(slot, variants, put)


def read_memory(slot: GpuSlot, variants: Variants, put: Put) -> None:
    """``nvmlDeviceGetMemoryInfo_v2`` (separates reserved memory), else v1 (``used`` includes reserved)."""
    h = slot.handle
    if variants.memory_v2 is not False:
        info, why = call(slot.unsupported, "memory_v2", pynvml.nvmlDeviceGetMemoryInfo, h, pynvml.nvmlMemory_v2)
        if info is not None:
            variants.memory_v2 = True
            put("memory_total_bytes", int(info.total), None)
            put("memory_used_bytes", int(info.used), None)
            put("memory_free_bytes", int(info.free), None)
            put("memory_reserved_bytes", int(info.reserved), None)
            return
        if why == NOT_IN_DRIVER:
            variants.memory_v2 = False
    info, why = call(slot.unsupported, "memory", pynvml.nvmlDeviceGetMemoryInfo, h)
    put("memory_total_bytes", None if info is None else int(info.total), why)
    put("memory_used_bytes", None if info is None else int(info.used), why)
    put("memory_free_bytes", None if info is None else int(info.free), why)
    put("memory_reserved_bytes", None, why or NOT_IN_DRIVER)


def read_temperature(slot: GpuSlot, variants: Variants, put: Put) -> None:
    """``nvmlDeviceGetTemperatureV``, else the deprecated ``nvmlDeviceGetTemperature`` (drivers before R555)."""
    names = [variants.temperature_fn] if variants.temperature_fn else list(TEMPERATURE_FUNCTIONS)
    why: str | None = NOT_IN_DRIVER
    for name in names:
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        temp, why = call(slot.unsupported, name, fn, slot.handle, pynvml.NVML_TEMPERATURE_GPU)
        if temp is not None:
            variants.temperature_fn = name
            put("temperature_c", float(temp), None)
            return
        if why != NOT_IN_DRIVER:
            break
    put("temperature_c", None, why)


def read_max_clocks(slot: GpuSlot, put: Put) -> None:
    """Maximum clocks never change while the driver runs: read them until both answer, then reuse."""
    if slot.max_clocks is not None:
        put("clock_sm_max_mhz", slot.max_clocks[0], None)
        put("clock_mem_max_mhz", slot.max_clocks[1], None)
        return
    get_max = pynvml.nvmlDeviceGetMaxClockInfo
    sm, sm_why = call(slot.unsupported, "max_clock_sm", get_max, slot.handle, pynvml.NVML_CLOCK_SM)
    mem, mem_why = call(slot.unsupported, "max_clock_mem", get_max, slot.handle, pynvml.NVML_CLOCK_MEM)
    if sm is not None and mem is not None:
        slot.max_clocks = (sm, mem)
    put("clock_sm_max_mhz", sm, sm_why)
    put("clock_mem_max_mhz", mem, mem_why)


def read_clock_reasons(slot: GpuSlot, variants: Variants, put: Put) -> None:
    """``nvmlDeviceGetCurrentClocksEventReasons`` (R535+), else ``...ThrottleReasons``."""
    names = (
        [variants.reasons_fn]
        if variants.reasons_fn
        else ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"]
    )
    why: str | None = NOT_IN_DRIVER
    for name in names:
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        mask, why = call(slot.unsupported, name, fn, slot.handle)
        if mask is not None:
            variants.reasons_fn = name
            put("throttle_reasons", decode_clock_reasons(int(mask)), None)
            return
        if why != NOT_IN_DRIVER:
            break
    put("throttle_reasons", None, why)


def read_slow(slot: GpuSlot) -> None:
    """The readings of the slow cadence, kept in the slot for the ticks between: power limit, energy, PCIe, ECC.

    The energy counter is read here, not every tick: a call takes 2.7 to 3.7 ms (median; up to 15.6 ms) on a real
    H100 (tests/data/captures/h100-*.json), against 0.03 ms for its memory, and what it is for, energy per step,
    is a difference over several seconds that a reading every 2 s gives as well."""
    h = slot.handle
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}

    def put(name: str, value: Any, reason: str | None) -> None:
        values[name] = value
        if reason is not None:
            reasons[name] = reason

    limit, why = call(slot.unsupported, "power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
    put("power_limit_w", None if limit is None else limit / MILLI, why)
    energy, why = call(slot.unsupported, "energy", pynvml.nvmlDeviceGetTotalEnergyConsumption, h)
    put("energy_j", None if energy is None else energy / MILLI, why)
    read_pcie_throughput(slot, put)
    ecc, why = call(
        slot.unsupported,
        "ecc",
        pynvml.nvmlDeviceGetTotalEccErrors,
        h,
        pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        pynvml.NVML_VOLATILE_ECC,
    )
    put("ecc_uncorrected_volatile", ecc, why)
    read_ecc_mode_and_link(slot, put)
    read_pci_bus_id(slot, put)
    slot.slow, slot.slow_reasons = values, reasons


def read_pci_bus_id(slot: GpuSlot, put: Put) -> None:
    """``nvmlDeviceGetPciInfo_v3``'s ``busId`` (every driver gputop runs on has it), read until it answers, then
    reused. A bus id not of NVML's form is no reading: it becomes a label, and a label is only what was checked."""
    if slot.pci_bus_id is not None:
        put("pci_bus_id", slot.pci_bus_id, None)
        return
    info, why = call(slot.unsupported, "pci_info", pynvml.nvmlDeviceGetPciInfo_v3, slot.handle)
    bus_id = None if info is None else info.busId
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", "replace")
    if bus_id is not None and not re.fullmatch(PCI_BUS_ID_FORM, bus_id):
        bus_id, why = None, INVALID
    slot.pci_bus_id = bus_id
    put("pci_bus_id", bus_id, why)


def read_pcie_throughput(slot: GpuSlot, put: Put) -> None:
    """PCIe RX and TX, reusing a reading younger than ``PCIE_THROUGHPUT_REUSE_S`` (each call takes 20 ms)."""
    keys = ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s")
    now = time.monotonic()
    if slot.pcie_throughput_at is not None and now - slot.pcie_throughput_at < PCIE_THROUGHPUT_REUSE_S:
        for key in keys:
            put(key, slot.slow.get(key), slot.slow_reasons.get(key))
        return
    throughput = pynvml.nvmlDeviceGetPcieThroughput
    rx, why = call(slot.unsupported, "pcie_rx", throughput, slot.handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)
    put("pcie_rx_bytes_per_s", None if rx is None else int(rx) * KIB, why)
    tx, why = call(slot.unsupported, "pcie_tx", throughput, slot.handle, pynvml.NVML_PCIE_UTIL_TX_BYTES)
    put("pcie_tx_bytes_per_s", None if tx is None else int(tx) * KIB, why)
    slot.pcie_throughput_at = now


def read_ecc_mode_and_link(slot: GpuSlot, put: Put) -> None:
    """Whether ECC is on, and the PCIe link's generation and width: now (an idle GPU drops to Gen 1) and at most."""
    h = slot.handle
    mode, why = call(slot.unsupported, "ecc_mode", pynvml.nvmlDeviceGetEccMode, h)
    put("ecc_enabled", None if mode is None else int(mode[0]) == pynvml.NVML_FEATURE_ENABLED, why)
    for key, name in (
        ("pcie_link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
        ("pcie_link_width", "nvmlDeviceGetCurrPcieLinkWidth"),
        ("pcie_link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
        ("pcie_link_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
    ):
        value, why = call(slot.unsupported, key, getattr(pynvml, name), h)
        put(key, None if value is None else int(value), why)
