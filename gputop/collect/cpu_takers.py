"""Who uses the host's CPUs: the processes that used the most CPU time between two process-table scans, and the
users whose processes did, so that a finding can say who holds the cores a job does not get.

The host collector's slow-tick scan reads every process's ``/proc/PID/stat`` for the process tree already; the
CPU time and start time are read from the same bytes. A process's user is looked up only for the processes that
used any CPU (the owner of ``/proc/PID``), so the scan costs one ``stat`` call per busy process, not per process.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable

from gputop.collect.procstat import CLOCK_TICKS
from gputop.model import CpuTakers, CpuUse
from gputop.sanitize import printable

TOP_PROCESSES = 8
"""Processes kept, most first: enough to name those beside a job whose own workers are among the busiest."""
TOP_USERS = 4
LEAST_PERCENT = 1.0
"""A process or user under 1 % of a core is left out: it holds no core anyone would miss."""

Busy = tuple[int, int, bytes]
"""``(CPU ticks used since the last scan, PID, the stat line)`` of a process that used any."""


def owner(pid: int) -> int | None:
    """The user id owning ``/proc/PID`` (the process's), or None once it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


_NAMES: dict[int, str] = {}


def user_name(uid: int) -> str:
    """A user id's name, or the number where it has none (common in containers); looked up once per id."""
    name = _NAMES.get(uid)
    if name is None:
        try:
            name = printable(pwd.getpwuid(uid).pw_name)
        except KeyError:
            name = str(uid)
        _NAMES[uid] = name
    return name


def stat_name(raw: bytes) -> str:
    """The process name of a stat line (between its first ``(`` and last ``)``), made printable: any user can name
    a process anything."""
    return printable(raw[raw.index(b"(") + 1 : raw.rindex(b")")].decode(errors="replace"))


def cpu_takers(
    busy: Iterable[Busy],
    elapsed_s: float,
    uid_of: Callable[[int], int | None] = owner,
    name_of: Callable[[int], str] = user_name,
) -> CpuTakers:
    """The top processes and users of ``busy`` (every process that used CPU over ``elapsed_s``), in % of a core."""
    per_tick = 100.0 / CLOCK_TICKS / elapsed_s
    by_user: dict[str, float] = {}
    found: list[CpuUse] = []
    for ticks, pid, raw in sorted(busy, reverse=True):
        percent = round(ticks * per_tick, 1)
        uid = uid_of(pid)
        user = None if uid is None else name_of(uid)
        if user is not None:
            by_user[user] = by_user.get(user, 0.0) + percent
        if len(found) < TOP_PROCESSES and percent >= LEAST_PERCENT:
            found.append(CpuUse(percent, user, pid, stat_name(raw)))
    users = sorted(((round(p, 1), u) for u, p in by_user.items() if p >= LEAST_PERCENT), reverse=True)
    return CpuTakers(tuple(found), tuple(CpuUse(p, u) for p, u in users[:TOP_USERS]))
