"""Host collector: CPU, memory and the host side of GPU processes, through psutil.

psutil computes a process's CPU % from the difference between two calls on the same ``Process`` object, so the
objects are kept between ticks, keyed by PID and checked against the start time: a PID reused by a new process
gets a new object instead of a CPU % that mixes the two.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable

import psutil

from gputop.model import (
    ACCESS_DENIED,
    MEASURING,
    NOT_VISIBLE,
    PROCESS_EXITED,
    ZOMBIE,
    HostInfo,
    HostProcess,
    frozen_reasons,
)

_HOST_FIELDS = ("ppid", "user", "name", "command", "cpu_percent", "rss_bytes", "start_time", "status", "num_threads")


def usable_cpu_count() -> int:
    """CPUs this process may run on (the affinity mask), which is what a job can really use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# The inode of the kernel's initial PID namespace (PROC_PID_INIT_INO in the kernel's proc_ns.h).
_INITIAL_PID_NAMESPACE_INODE = 0xEFFFFFFC


def in_nested_pid_namespace() -> bool:
    """Whether this process lives in a PID namespace other than the host's (a container without --pid=host).

    NVML always reports host PIDs, so from such a namespace they name other processes or none at all.
    """
    try:
        return os.stat("/proc/self/ns/pid").st_ino != _INITIAL_PID_NAMESPACE_INODE
    except OSError:
        return False


class HostCollector:
    """Reads the machine and the processes gputop is asked about. Never raises for a vanished process."""

    def __init__(self, nested_pid_namespace: bool | None = None) -> None:
        self.nested_pid_namespace = in_nested_pid_namespace() if nested_pid_namespace is None else nested_pid_namespace
        self._procs: dict[int, psutil.Process] = {}
        self._hostname = socket.gethostname()
        self._cpu_count = psutil.cpu_count() or 1
        # The first cpu_percent call only starts psutil's measurement window.
        psutil.cpu_percent(None)
        psutil.cpu_percent(None, percpu=True)
        self._cpu_primed = False

    def host_info(self) -> HostInfo:
        total = psutil.cpu_percent(None)
        per_core = tuple(psutil.cpu_percent(None, percpu=True))
        primed, self._cpu_primed = self._cpu_primed, True
        memory = psutil.virtual_memory()
        swap = psutil.swap_memory()
        try:
            load: tuple[float, float, float] | None = os.getloadavg()
        except OSError:
            load = None
        return HostInfo(
            hostname=self._hostname,
            cpu_percent=total if primed else None,
            cpu_percent_per_core=per_core if primed else (),
            cpu_count=self._cpu_count,
            usable_cpu_count=usable_cpu_count(),
            load_average=load,
            memory_total_bytes=memory.total,
            memory_used_bytes=memory.total - memory.available,
            memory_available_bytes=memory.available,
            swap_total_bytes=swap.total,
            swap_used_bytes=swap.used,
        )

    def prime(self, pids: Iterable[int]) -> None:
        """Start the CPU % window for these PIDs, so the next ``processes`` call has a value for them."""
        for pid in pids:
            proc = self._process(pid)
            if proc is not None:
                with contextlib.suppress(psutil.Error):
                    proc.cpu_percent(None)

    def related(self, roots: Iterable[int]) -> set[int]:
        """The roots with their ancestors (below init) and all their descendants, from one process-table scan.

        DataLoader workers sit below the training process as children (fork, spawn) or as grandchildren
        under a fork server, so descendants are followed all the way down.
        """
        parent: dict[int, int] = {}
        for proc in psutil.process_iter(["ppid"]):
            ppid = proc.info.get("ppid")
            if ppid is not None:
                parent[proc.pid] = ppid
        children: dict[int, list[int]] = {}
        for pid, ppid in parent.items():
            children.setdefault(ppid, []).append(pid)
        found: set[int] = set()
        for root in roots:
            found.add(root)
            up = parent.get(root)
            while up is not None and up > 1 and up not in found:
                found.add(up)
                up = parent.get(up)
            stack = list(children.get(root, ()))
            while stack:
                pid = stack.pop()
                if pid not in found:
                    found.add(pid)
                    stack.extend(children.get(pid, ()))
        return found

    def processes(self, pids: Iterable[int]) -> dict[int, HostProcess]:
        """The host side of each PID; PIDs not asked about are forgotten."""
        wanted = set(pids)
        for gone in set(self._procs) - wanted:
            del self._procs[gone]
        return {pid: self._describe(pid) for pid in wanted}

    def _process(self, pid: int) -> psutil.Process | None:
        proc = self._procs.get(pid)
        if proc is not None:
            try:
                if proc.is_running():  # compares the start time: False once the PID is reused
                    return proc
            except psutil.Error:
                pass
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            return None
        except psutil.Error:
            return None
        self._procs[pid] = proc
        return proc

    def _describe(self, pid: int) -> HostProcess:
        before = self._procs.get(pid)
        proc = self._process(pid)
        if proc is None:
            if psutil.pid_exists(pid):
                return HostProcess(pid, unavailable=frozen_reasons(dict.fromkeys(_HOST_FIELDS, ACCESS_DENIED)))
            if before is not None or not self.nested_pid_namespace:
                # In the host's namespace every NVML PID is ours to see: a missing one has just exited.
                return HostProcess(pid, unavailable=frozen_reasons(dict.fromkeys(_HOST_FIELDS, PROCESS_EXITED)))
            hidden = frozen_reasons(dict.fromkeys(_HOST_FIELDS, NOT_VISIBLE))
            return HostProcess(pid, visible=False, unavailable=hidden)
        fresh = proc is not before
        values: dict[str, object] = {}
        reasons: dict[str, str] = {}
        try:
            with proc.oneshot():
                for name, read in (
                    ("status", proc.status),
                    ("ppid", proc.ppid),
                    ("num_threads", proc.num_threads),
                    ("start_time", proc.create_time),
                    ("name", proc.name),
                    ("user", proc.username),
                    ("cpu_percent", lambda: proc.cpu_percent(None)),
                    ("rss_bytes", lambda: proc.memory_info().rss),
                    ("command", lambda: " ".join(proc.cmdline()) or f"[{proc.name()}]"),
                ):
                    try:
                        values[name] = read()
                    except psutil.ZombieProcess:
                        reasons[name] = ZOMBIE
                    except psutil.NoSuchProcess:
                        raise
                    except psutil.AccessDenied:
                        reasons[name] = ACCESS_DENIED
                    except KeyError:  # username() of a UID with no passwd entry (containers)
                        values[name] = str(proc.uids().real)
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            missing = {name: reasons.get(name, PROCESS_EXITED) for name in _HOST_FIELDS if name not in values}
            return HostProcess(pid, unavailable=frozen_reasons(missing), **values)  # type: ignore[arg-type]
        if fresh and "cpu_percent" in values:
            # A process seen for the first time has no CPU window yet: its 0.0 would be a made-up zero.
            values.pop("cpu_percent")
            reasons["cpu_percent"] = MEASURING
        if values.get("status") == psutil.STATUS_ZOMBIE:
            for name in _HOST_FIELDS:
                if name not in values:
                    reasons[name] = ZOMBIE
        return HostProcess(pid, unavailable=frozen_reasons(reasons), **values)  # type: ignore[arg-type]
