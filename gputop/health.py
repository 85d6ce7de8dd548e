"""A GPU's health state (ok / warn / critical) from its Xids, ECC, remapped rows, retired pages, PCIe replays and
thermal violation time. Pure: the collector gathers the readings (``gputop.collect.nvml.health``), this judges.

The thresholds are DCGM's health watches (NVIDIA Data Center GPU Manager, ``dcgmHealthWatch``: its memory, PCIe and
thermal watches and their limits in ``dcgm_gpu_hardware_limits.h``); what each Xid means is NVIDIA's Xid catalogue
(``gputop.xids``). docs/health.md lists them with their sources.
"""

from __future__ import annotations

import dataclasses

from gputop.model import HEALTH_CRITICAL, HEALTH_OK, HEALTH_WARN, GpuHealth, HealthState
from gputop.xids import describe

PCIE_REPLAYS_PER_MIN_WARN = 8.0
"""DCGM_LIMIT_MAX_PCIREPLAY_RATE (dcgm_gpu_hardware_limits.h): "8 replays per minute is the maximum recommended by
RM" (the driver's resource manager); DCGM's PCIe watch warns above it. Replays are link-level retries: a rising rate
means a bad riser, slot or cable, and slower transfers long before anything fails."""
RETIRED_PAGES_CRITICAL = 60
"""DCGM_LIMIT_MAX_RETIRED_PAGES: DCGM's memory watch fails a GPU with this many retired pages (NVIDIA's dynamic page
retirement guide: the GPU is due for replacement)."""
RETIRED_PAGES_WARN = 15
"""DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT: the soft limit DCGM's memory watch warns at."""
XID_WARN_HOLD_S = 600.0
"""How long an Xid of the application's own kind (the catalogue's RESTART_APP) keeps the GPU at ``warn`` after it
last came: long enough to be seen on a dashboard looked at now and then, short enough that one crashed job does not
mark a GPU for good. An Xid that asks for a reset or a reboot holds as long as gputop watches."""

_RANK: dict[HealthState, int] = {HEALTH_OK: 0, HEALTH_WARN: 1, HEALTH_CRITICAL: 2}


def worst(a: HealthState, b: HealthState) -> HealthState:
    return a if _RANK[a] >= _RANK[b] else b


def judged(
    readings: GpuHealth, ecc_uncorrected: int | None, thermal_violation_growth_s: float | None, now: float
) -> GpuHealth:
    """``readings`` with the state and causes they call for, worst first.

    Args:
        readings: the counters as read, ``state`` and ``causes`` left at their defaults.
        ecc_uncorrected: the GPU's volatile uncorrected ECC count (``Gpu.ecc_uncorrected_volatile``).
        thermal_violation_growth_s: how much the thermal violation time grew since the last reading.
        now: the time of the reading (seconds since the epoch), against which an Xid's age is taken.
    """
    found: list[tuple[HealthState, str]] = []
    for seen in readings.xids:
        xid = describe(seen.xid)
        if xid.severity == HEALTH_WARN and now - seen.last_time > XID_WARN_HOLD_S:
            continue
        times = "" if seen.count == 1 else f" ({seen.count} times)"
        found.append((xid.severity, f"Xid {seen.xid}{times}: {xid.meaning}; {xid.action}"))
    if ecc_uncorrected:
        # DCGM's memory watch fails a GPU with a volatile double-bit error (DCGM_FR_VOLATILE_DBE_DETECTED).
        found.append((HEALTH_CRITICAL, f"{ecc_uncorrected} uncorrectable ECC errors since the driver loaded; reset it"))
    if readings.remapped_rows_failed:
        # DCGM's memory watch: DCGM_FR_ROW_REMAP_FAILURE fails the GPU.
        found.append((HEALTH_CRITICAL, "a memory row could not be remapped; the GPU needs servicing"))
    if readings.remapped_rows_pending:
        # DCGM_FR_PENDING_ROW_REMAP: a warning; the remapping takes effect at the next reset.
        found.append((HEALTH_WARN, "a memory row remapping waits for a GPU reset; reset it when convenient"))
    retired = (readings.retired_pages_single_bit or 0) + (readings.retired_pages_double_bit or 0)
    if retired >= RETIRED_PAGES_CRITICAL:
        found.append((HEALTH_CRITICAL, f"{retired} memory pages retired (DCGM fails a GPU at 60); have it serviced"))
    elif retired >= RETIRED_PAGES_WARN:
        found.append((HEALTH_WARN, f"{retired} memory pages retired (DCGM warns at 15)"))
    if readings.retired_pages_pending:
        # DCGM_FR_PENDING_PAGE_RETIREMENTS: a warning; the page is retired at the driver's next reload.
        found.append((HEALTH_WARN, "a memory page waits to be retired; reset the GPU or reboot when convenient"))
    rate = readings.pcie_replays_per_min
    if rate is not None and rate > PCIE_REPLAYS_PER_MIN_WARN:
        found.append((HEALTH_WARN, f"PCIe replays at {rate:.0f}/min (DCGM warns above 8): check the slot and riser"))
    if thermal_violation_growth_s:
        # DCGM's thermal watch warns on thermal violations: clocks held down by heat, not by the work.
        found.append((HEALTH_WARN, f"clocks held down by heat for {thermal_violation_growth_s:.1f} s; check cooling"))
    found.sort(key=lambda item: -_RANK[item[0]])
    state: HealthState = HEALTH_OK
    for severity, _ in found:
        state = worst(state, severity)
    return dataclasses.replace(readings, state=state, causes=tuple(cause for _, cause in found))
