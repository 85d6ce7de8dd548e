"""A snapshot's unreadable values (N/A): each with its reason, repeats collapsed, the ones that can be fixed with
the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.doctor.checks.words import GENERIC_FIX, plural, spans
from gputop.doctor.result import INFO, LIMITED, OK, Check, Fact
from gputop.model import (
    ACCESS_DENIED,
    INVALID,
    MEASURING,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    NOT_IN_MIG_MODE,
    NOT_REPORTED,
    NOT_VISIBLE,
    PROCESS_EXITED,
    UNSUPPORTED,
    ZOMBIE,
    Snapshot,
)

PASSING = frozenset({MEASURING, PROCESS_EXITED, ZOMBIE, "no recent sample"})
"""Reasons that need nothing done and say nothing of the machine: the value comes with the next reading."""
FIXED = frozenset({UNSUPPORTED, NOT_IN_MIG_MODE, NOT_REPORTED})
"""Reasons no one can change: the hardware has no such value, NVML gives none on a GPU partitioned with MIG, or
the driver marks it not available (WDDM, vGPU). Information, not a limit."""
HARMLESS = PASSING | FIXED
REASON_ADVICE = {
    NO_PERMISSION: "run gputop as root (sudo gputop) to read the values NVML refuses this user",
    ACCESS_DENIED: "run gputop as root to read other users' processes in /proc",
    NOT_IN_DRIVER: "upgrade the NVIDIA driver (R535 or newer answers every call gputop makes)",
    NOT_VISIBLE: "run gputop on the host, or start the container with --pid=host",
    INVALID: "the driver returned a value that is not a number: update the driver",
}


@dataclass(frozen=True)
class Unreadable:
    """One field unreadable for one reason, on every GPU, process or host where it is."""

    owner: str  # "driver", "gpu", "gpu_process", "host_process"
    field: str
    reason: str
    where: tuple[int, ...]  # GPU indices, or PIDs

    @property
    def harmless(self) -> bool:
        return self.reason in HARMLESS

    def line(self) -> str:
        if self.owner == "driver":
            return f"driver: {self.reason}"
        if self.owner == "gpu":
            return f"{self.field}: {self.reason} on GPU {spans(self.where)}"
        what = "GPU process" if self.owner == "gpu_process" else "process"
        pids = ", ".join(str(p) for p in self.where[:5]) + (", …" if len(self.where) > 5 else "")
        return f"{self.field}: {self.reason} for {plural(len(self.where), what, what + 'es')} (PID {pids})"


def unreadable(snap: Snapshot) -> list[Unreadable]:
    """Every ``unavailable`` entry of the snapshot, repeats collapsed: one per owner, field and reason."""
    groups: dict[tuple[str, str, str], set[int]] = {}

    def add(owner: str, where: int, reasons: Mapping[str, str]) -> None:
        for name, reason in reasons.items():
            groups.setdefault((owner, name, reason), set()).add(where)

    if not snap.driver.ok:
        groups[("driver", "driver", snap.driver.reason or "unavailable")] = set()
    for gpu in snap.gpus:
        add("gpu", gpu.index, gpu.unavailable)
    for p in snap.processes:
        add("gpu_process", p.pid, p.unavailable)
    for h in snap.host_processes:
        add("host_process", h.pid, h.unavailable)
    return [
        Unreadable(owner, name, reason, tuple(sorted(where)))
        for (owner, name, reason), where in sorted(groups.items(), key=lambda kv: (_OWNERS.index(kv[0][0]), kv[0]))
    ]


_OWNERS = ("driver", "gpu", "gpu_process", "host_process")


def _grouped(found: Sequence[Unreadable]) -> tuple[str, ...]:
    """One line per reason and place, naming its fields: a GPU in MIG mode lacks a dozen fields for one reason."""
    groups: dict[tuple[str, str, tuple[int, ...]], list[str]] = {}
    for u in found:
        groups.setdefault((u.owner, u.reason, u.where), []).append(u.field)
    return tuple(
        Unreadable(owner, ", ".join(fields), reason, where).line() for (owner, reason, where), fields in groups.items()
    )


def fields_check(found: Sequence[Unreadable]) -> Check:
    title = "Unreadable values (N/A) in a snapshot"
    facts: dict[str, Fact] = {
        "unreadable": [{"owner": u.owner, "field": u.field, "reason": u.reason, "where": list(u.where)} for u in found]
    }
    if not found:
        return Check("fields", title, OK, "every value was read", facts=facts)
    limits = [u for u in found if not u.harmless]
    unchangeable = [u for u in found if u.reason in FIXED]
    fixed = _grouped(unchangeable)
    lines = tuple(u.line() for u in found if u.reason not in FIXED)
    if not limits:
        if not fixed:
            summary = f"{plural(len(found), 'field')} N/A, each one still measuring"
            return Check("fields", title, OK, summary, lines, facts=facts)
        return Check(
            "fields",
            title,
            INFO,
            f"{plural(len(unchangeable), 'field')} N/A that this hardware, its mode or its driver does not report",
            lines,
            facts=facts,
            info=fixed,
        )
    advice: list[str] = []
    for u in limits:
        hint = REASON_ADVICE.get(u.reason, GENERIC_FIX)
        if hint not in advice:
            advice.append(hint)
    return Check(
        "fields",
        title,
        LIMITED,
        f"{plural(len(limits), 'field')} N/A for a reason that can be fixed (of {len(found)} N/A)",
        lines,
        tuple(advice),
        facts,
        fixed,
    )
