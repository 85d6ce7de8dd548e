"""A GPU's health readings: Xid events (a thread of their own), remapped rows, retired pages, the PCIe replay
counter and the time its clocks spent under each limit. ``gputop.health`` judges them.

Xids reach NVML only as events: ``nvmlEventSetCreate``, ``nvmlDeviceRegisterEvents`` with
``nvmlEventTypeXidCriticalError``, then ``nvmlEventSetWait_v2``, which blocks until an event or its timeout. The
wait runs on ``XidWatcher``'s own thread, so the sampler never waits for it; the sampler reads what the thread
counted. A driver without the event calls (or a GPU that does not report Xids) leaves Xids N/A with the reason and
every other reading as it was.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Sequence
from typing import Any

from gputop.collect.nvml.errors import GpuLost, call, nvml_code, reason_of
from gputop.collect.nvml.slot import GpuSlot
from gputop.health import judged
from gputop.model import MEASURING, NOT_IN_DRIVER, UNSUPPORTED, GpuHealth, ViolationPolicy, XidCount, frozen_reasons

try:
    import pynvml
except ImportError:
    pynvml = None

XID_EVENT = 0x8
"""``nvmlEventTypeXidCriticalError`` (nvml.h)."""
NVML_ERROR_TIMEOUT = 10
WAIT_MS = 250
"""How long one wait blocks: the longest ``close`` waits for the thread to notice it should end."""
NOT_WATCHED = "not watched by a single snapshot: Xid events are counted while gputop keeps running"
"""Why ``--once`` has no Xids: its collector starts no watcher (``NvmlCollector(watch_xids=False)``)."""
VIOLATION_POLICIES: tuple[ViolationPolicy, ...] = (
    "power",
    "thermal",
    "sync_boost",
    "board_limit",
    "low_utilization",
    "reliability",
)
"""``NVML_PERF_POLICY_*`` 0-5 in order. 6 and 7 answer Invalid Argument (a real H100 with R580,
tests/data/captures/h100-80gb-hbm3-r580-health.nvml.json), and the totals (10, 11) add nothing to these."""
NS = 1e9
XIDS = "xids"
MAX_XIDS_KEPT = 32
"""The most different Xids counted per GPU: NVIDIA's catalogue has some 170, a failing GPU shows a handful. The
number comes from the driver as a 64-bit value, so a driver gone wrong could send a new one with every event; past
this many, the one seen longest ago makes room, so that memory, the JSON document and the exporter's series stay
bounded and the newest Xids are the ones shown."""


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value


class XidWatcher:
    """Counts each GPU's Xids on a thread of its own. ``reason(index)`` says why a GPU's Xids are not watched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, dict[int, XidCount]] = {}
        self._reasons: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set: Any = None

    def start(self, slots: Sequence[GpuSlot]) -> None:
        """Register every open GPU for Xid events and start the thread; what fails is kept as each GPU's reason."""
        try:
            self._event_set = pynvml.nvmlEventSetCreate()
        except Exception as exc:  # NVMLError, or a missing symbol
            self._set_reason([slot.index for slot in slots], reason_of(exc))
            return
        by_address: dict[int, int] = {}
        for slot in slots:
            if slot.handle is None:
                self._reasons[slot.index] = slot.lost_reason or "GPU unavailable"
                continue
            try:
                supported, why = call({}, "event_types", pynvml.nvmlDeviceGetSupportedEventTypes, slot.handle)
                if supported is not None and not int(supported) & XID_EVENT:
                    self._reasons[slot.index] = UNSUPPORTED
                    continue
                _, why = call({}, "register", pynvml.nvmlDeviceRegisterEvents, slot.handle, XID_EVENT, self._event_set)
            except GpuLost as lost:  # the tick finds it lost too, and shows it so
                why = lost.reason
            if why is not None:
                self._reasons[slot.index] = why
                continue
            address = _address(slot.handle)
            if address is not None:
                by_address[address] = slot.index
        if not by_address:
            self._free()
            return
        self._thread = threading.Thread(target=self._run, args=(by_address,), name="gputop-xid-events", daemon=True)
        self._thread.start()

    def _set_reason(self, indices: Sequence[int], reason: str) -> None:
        with self._lock:
            for index in indices:
                self._reasons[index] = reason

    def _run(self, by_address: dict[int, int]) -> None:
        while not self._stop.is_set():
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, WAIT_MS)
            except Exception as exc:
                if nvml_code(exc) == NVML_ERROR_TIMEOUT:
                    continue
                if not self._stop.is_set():
                    why = reason_of(exc)
                    stopped = why if why == NOT_IN_DRIVER else f"Xid events stopped: {why}"
                    self._set_reason(list(by_address.values()), stopped)
                return
            index = by_address.get(_address(data.device) or 0)
            if index is None or int(data.eventType) != XID_EVENT:
                continue
            xid = int(data.eventData)
            with self._lock:
                seen = self._counts.setdefault(index, {})
                before = seen.get(xid)
                if before is None and len(seen) >= MAX_XIDS_KEPT:
                    del seen[min(seen.values(), key=lambda x: x.last_time).xid]
                seen[xid] = XidCount(xid, (before.count if before else 0) + 1, time.time())

    def xids(self, index: int) -> tuple[tuple[XidCount, ...], str | None]:
        """The GPU's Xids so far in the order they first came, and why they are not watched where they are not."""
        with self._lock:
            return tuple(self._counts.get(index, {}).values()), self._reasons.get(index)

    def close(self) -> None:
        """End the thread (within one wait) and free the event set; before ``nvmlShutdown``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_MS / 1000 * 4)
        self._free()

    def _free(self) -> None:
        if self._event_set is not None and (self._thread is None or not self._thread.is_alive()):
            with contextlib.suppress(Exception):  # the set goes with the NVML session anyway
                pynvml.nvmlEventSetFree(self._event_set)
            self._event_set = None


def read(slot: GpuSlot, watcher: XidWatcher | None, ecc_uncorrected: int | None) -> GpuHealth:
    """The GPU's health readings, judged. Called on the slow cadence; the rates are over the time since the last."""
    h = slot.handle
    reasons: dict[str, str] = {}
    values: dict[str, Any] = {}
    rows, why = call(slot.unsupported, "remapped_rows", pynvml.nvmlDeviceGetRemappedRows, h)
    for i, name in enumerate(("correctable", "uncorrectable", "pending", "failed")):
        key = f"remapped_rows_{name}"
        values[key] = None if rows is None else (int(rows[i]) if i < 2 else bool(rows[i]))
        if why is not None:
            reasons[key] = why
    for key, cause in (("retired_pages_single_bit", 0), ("retired_pages_double_bit", 1)):
        pages, why = call(slot.unsupported, key, pynvml.nvmlDeviceGetRetiredPages, h, cause)
        values[key] = None if pages is None else len(pages)
        if why is not None:
            reasons[key] = why
    pending, why = call(slot.unsupported, "retired_pages_pending", pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
    values["retired_pages_pending"] = None if pending is None else bool(pending)
    if why is not None:
        reasons["retired_pages_pending"] = why
    now = time.time()
    replays, why = call(slot.unsupported, "pcie_replays", pynvml.nvmlDeviceGetPcieReplayCounter, h)
    values["pcie_replays"] = None if replays is None else int(replays)
    if why is not None:
        reasons["pcie_replays"] = why
        reasons["pcie_replays_per_min"] = why
    violations: list[tuple[ViolationPolicy, float]] = []
    for number, policy in enumerate(VIOLATION_POLICIES):
        spent, why = call(slot.unsupported, f"violation_{policy}", pynvml.nvmlDeviceGetViolationStatus, h, number)
        if spent is not None:
            violations.append((policy, int(spent.violationTime) / NS))
        elif why is not None and "violation_s" not in reasons:
            reasons["violation_s"] = why
    values["violation_s"] = tuple(violations)
    thermal = dict(violations).get("thermal")
    before = slot.health_before
    values["pcie_replays_per_min"] = None
    growth: float | None = None
    if before is not None:
        then, replays_then, thermal_then = before
        minutes = (now - then) / 60
        if replays is not None and replays_then is not None and minutes > 0:
            values["pcie_replays_per_min"] = max(0, int(replays) - replays_then) / minutes
        if thermal is not None and thermal_then is not None:
            growth = max(0.0, thermal - thermal_then)
    elif replays is not None:
        reasons.setdefault("pcie_replays_per_min", MEASURING)
    slot.health_before = (now, None if replays is None else int(replays), thermal)
    if watcher is None:
        xids: tuple[XidCount, ...] = ()
        xid_reason: str | None = NOT_WATCHED
    else:
        xids, xid_reason = watcher.xids(slot.index)
    if xid_reason is not None:
        reasons[XIDS] = xid_reason
    readings = GpuHealth(xids=xids, unavailable=frozen_reasons(reasons), **values)
    return judged(readings, ecc_uncorrected, growth, now)
