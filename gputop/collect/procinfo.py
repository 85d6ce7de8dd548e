"""The /proc reads of the training view beyond ``/proc/PID/stat``: a process's main thread, its threads' names,
its affinity mask and its unique memory. Each returns None (or a reason) for a process that is gone or not ours.
"""

from __future__ import annotations

import os

from gputop.collect.procstat import ProcStat, parse_stat, read_proc_text
from gputop.model import ACCESS_DENIED, PROCESS_EXITED


def main_thread_stat(pid: int) -> ProcStat | None:
    """The main thread's own stat (``/proc/PID/stat`` sums CPU time over all threads)."""
    try:
        return parse_stat(read_proc_text(f"/proc/{pid}/task/{pid}/stat"))
    except OSError:
        return None


def main_thread_schedstat(pid: int) -> int | None:
    """Nanoseconds the main thread has spent on a CPU or waiting in a run queue for one
    (``/proc/PID/task/PID/schedstat``: time on the CPU, time runnable but waiting, timeslices). None where the
    kernel keeps no such account (built without ``CONFIG_SCHED_INFO``) or the process is gone."""
    try:
        fields = read_proc_text(f"/proc/{pid}/task/{pid}/schedstat").split()
        return int(fields[0]) + int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def wait_channel(pid: int) -> str | None:
    """The kernel function the main thread sleeps in (``do_sys_poll``, ``futex_wait_queue``...), if shown."""
    try:
        text = read_proc_text(f"/proc/{pid}/wchan").strip()
    except OSError:
        return None
    # gcc suffixes (do_sys_poll.isra.0, poll_schedule_timeout.constprop.0) say nothing to a reader
    return None if text in ("", "0") else text.split(".")[0]


def threads_named(pid: int, name: str) -> tuple[int, ...]:
    """The threads of ``pid`` named ``name``, or, for a name ending in ``_``, whose names start with it."""
    found = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return ()
    for tid in tids:
        try:
            comm = read_proc_text(f"/proc/{pid}/task/{tid}/comm").rstrip("\n")
            if comm == name or (name.endswith("_") and comm.startswith(name)):
                found.append(int(tid))
        except OSError:
            continue
    return tuple(sorted(found))


def usable_cpu_count(pid: int) -> int | None:
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return None


def uss_bytes(pid: int) -> tuple[int | None, str | None]:
    """Memory only this process holds: the private pages of ``smaps_rollup`` (as psutil's ``uss``)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except FileNotFoundError:
        return None, PROCESS_EXITED
    except PermissionError:
        return None, ACCESS_DENIED
    except OSError as exc:
        return None, f"error: {exc.strerror}"
    total = 0
    for line in text.splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")):
            total += int(line.split()[1]) * 1024
    return total, None
