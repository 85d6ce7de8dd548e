"""Each GPU's health (``gputop.health``): its state, and each reading behind it or why the GPU or driver has none."""

from __future__ import annotations

from gputop.doctor.checks.words import plural, spans
from gputop.doctor.result import LIMITED, OK, Check, Fact, Verdict
from gputop.document import health_record
from gputop.model import GPU_OK, HEALTH_OK, NOT_IN_DRIVER, UNSUPPORTED, Gpu, GpuHealth, Snapshot

XID_HISTORY = "earlier ones are in the kernel log: sudo dmesg | grep -i xid"
"""Where Xids from before gputop watched are: NVML's events only deliver those that come after registration."""
REASON_WORDS = {UNSUPPORTED: "unsupported by this GPU", NOT_IN_DRIVER: "not in this driver"}


def _why(health: GpuHealth, key: str) -> str:
    reason = health.unavailable.get(key, "not read")
    return f"N/A ({REASON_WORDS.get(reason, reason)})"


def _count(value: int | None, word: str) -> str:
    return "" if value is None else f"{value} {word}"


def _flag(value: bool | None, yes: str, no: str) -> str:
    return "" if value is None else yes if value else no


def _reading(health: GpuHealth, key: str, parts: list[str]) -> str:
    """The parts that were read, joined, or the reason the first key's reading is missing."""
    shown = [part for part in parts if part]
    return ", ".join(shown) if shown else _why(health, key)


def readings(health: GpuHealth) -> list[str]:
    """One line per reading: what it is now, or N/A with why."""
    if "xids" in health.unavailable:
        xids = _why(health, "xids")
    elif health.xids:
        xids = "watched: " + ", ".join(f"Xid {x.xid} ×{x.count}" for x in health.xids)
    else:
        xids = f"watched, none since doctor started ({XID_HISTORY})"
    rows = _reading(
        health,
        "remapped_rows_correctable",
        [
            _count(health.remapped_rows_correctable, "correctable"),
            _count(health.remapped_rows_uncorrectable, "uncorrectable"),
            _flag(health.remapped_rows_pending, "one waits for a reset", "none pending"),
            _flag(health.remapped_rows_failed, "a remapping FAILED", "none failed"),
        ],
    )
    pages = _reading(
        health,
        "retired_pages_single_bit",
        [
            _count(health.retired_pages_single_bit, "single-bit"),
            _count(health.retired_pages_double_bit, "double-bit"),
            _flag(health.retired_pages_pending, "one waits for a reset", "none pending"),
        ],
    )
    replays = (
        _why(health, "pcie_replays")
        if health.pcie_replays is None
        else f"{health.pcie_replays} since the driver loaded"
    )
    limits = (
        ", ".join(f"{policy.replace('_', ' ')} {seconds:.1f} s" for policy, seconds in health.violation_s)
        if health.violation_s
        else _why(health, "violation_s")
    )
    return [
        f"Xid events: {xids}",
        f"remapped rows: {rows}",
        f"retired pages: {pages}",
        f"PCIe replays: {replays}",
        f"time under each clock limit: {limits}",
    ]


def health_check(snap: Snapshot) -> Check:
    title = "GPU health"
    details: list[str] = []
    advice: list[str] = []
    unhealthy: list[int] = []
    unread: list[int] = []
    old_driver: list[int] = []
    facts: dict[str, Fact] = {}
    for gpu in snap.gpus:
        health = gpu.health
        facts[str(gpu.index)] = health_record(health)
        if health is None:
            unread.append(gpu.index)
            details.append(f"GPU {gpu.index}: not read ({_not_read(gpu)})")
            continue
        details.append(f"GPU {gpu.index}: {health.state}")
        details += [f"  {line}" for line in readings(health)]
        if health.state != HEALTH_OK:
            unhealthy.append(gpu.index)
            advice += [f"GPU {gpu.index}: {cause}" for cause in health.causes]
        if NOT_IN_DRIVER in health.unavailable.values():
            old_driver.append(gpu.index)
    if old_driver:
        advice.append(
            f"GPU {spans(old_driver)}: upgrade the NVIDIA driver for the health readings it does not have "
            "(R450 or later: Xid events are waited for with nvmlEventSetWait_v2, rows read with "
            "nvmlDeviceGetRemappedRows)"
        )
    verdict: Verdict = LIMITED if unhealthy or old_driver else OK
    if unhealthy:
        states = {g.index: g.health.state for g in snap.gpus if g.health is not None}
        summary = "; ".join(f"GPU {i} {states[i]}" for i in unhealthy)
    elif snap.gpus and len(unread) == len(snap.gpus):
        summary = "not read on any GPU"
    else:
        read = len(snap.gpus) - len(unread)
        summary = f"ok on {plural(read, 'GPU')}" + (f"; not read on GPU {spans(unread)}" if unread else "")
        if old_driver:
            summary += f"; some readings not in this driver on GPU {spans(old_driver)}"
    return Check("health", title, verdict, summary, tuple(details), tuple(advice), {"gpus": facts})


def _not_read(gpu: Gpu) -> str:
    if gpu.state != GPU_OK:
        return gpu.reason or gpu.state
    return gpu.unavailable.get("health", "no reading")
