"""Host collector: CPU, memory and the host side of the processes gputop watches, through psutil and /proc.

A process's CPU % is the difference of its CPU time between two ticks, so each watched PID is remembered with
its start time: a PID reused by a new process starts a new window instead of a CPU % that mixes the two.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psutil

from gputop.collect.container import in_cgroup_namespace, read_container, slurm_ids
from gputop.collect.cpu_takers import Busy, cpu_takers
from gputop.collect.pods.resolver import SETTLE_S, PodResolver, from_environment
from gputop.collect.procstat import CLOCK_TICKS, ProcStat, parse_stat, read_proc_bytes
from gputop.collect.slurm import SlurmJobs
from gputop.model import (
    ACCESS_DENIED,
    MEASURING,
    NOT_VISIBLE,
    PROCESS_EXITED,
    ZOMBIE,
    Container,
    CpuTakers,
    HostInfo,
    HostProcess,
    Pod,
    SlurmJob,
    frozen_reasons,
)
from gputop.sanitize import printable

_HOST_FIELDS = (
    "ppid",
    "user",
    "name",
    "command",
    "cpu_percent",
    "rss_bytes",
    "start_time",
    "status",
    "num_threads",
    "container",
)
CONTAINER_REFRESH_S = 10.0
"""How often a watched process's cgroup is read again: a process rarely moves (``systemd-run --scope``, a Slurm
step adopting it), and one read per process per tick would cost more than the rest of its host side."""


def usable_cpu_count() -> int:
    """CPUs this process may run on (the affinity mask), which is what a job can really use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CPU_TIME_FIELDS = 10
"""/proc/stat's times per CPU line: user nice system idle iowait irq softirq steal guest guest_nice."""


def parse_cpu_times(data: bytes) -> list[tuple[int, ...]]:
    """The times of /proc/stat's ``cpu`` line and of each ``cpuN`` line after it, in clock ticks."""
    return [
        tuple(int(value) for value in line.split()[1 : CPU_TIME_FIELDS + 1])
        for line in data.splitlines()
        if line.startswith(b"cpu")
    ]


def read_cpu_times() -> list[tuple[int, ...]]:
    """``parse_cpu_times`` of this machine; empty where /proc/stat cannot be read or parsed."""
    try:
        return parse_cpu_times(read_proc_bytes("/proc/stat"))
    except (OSError, ValueError):
        return []


def busy_percent(before: tuple[int, ...], after: tuple[int, ...]) -> float:
    """The busy share of one CPU line between two readings, as psutil's ``cpu_percent`` computes it: each time's
    growth (never below zero), guest times left out of the total (``user`` and ``nice`` hold them already), busy
    being all but idle and iowait."""
    deltas = [max(0, b - a) for a, b in zip(before, after)]
    total = sum(deltas) - sum(deltas[8:10])
    if total <= 0:
        return 0.0
    busy = total - deltas[3] - (deltas[4] if len(deltas) > 4 else 0)
    return round(busy / total * 100, 1)


MEMINFO_FIELDS = (b"MemTotal:", b"MemAvailable:", b"SwapTotal:", b"SwapFree:")


def parse_meminfo(data: bytes) -> tuple[int, int, int, int] | None:
    """Memory total and available, swap total and used, in bytes, from /proc/meminfo's text; None when a field is
    missing (MemAvailable came with Linux 3.14) or unreadable."""
    found: dict[bytes, int] = {}
    for line in data.splitlines():
        name, _, rest = line.partition(b" ")
        if name in MEMINFO_FIELDS:
            try:
                found[name] = int(rest.split()[0]) * 1024
            except (IndexError, ValueError):
                return None
    if len(found) != len(MEMINFO_FIELDS):
        return None
    total, available, swap_total, swap_free = (found[name] for name in MEMINFO_FIELDS)
    return total, available, swap_total, swap_total - swap_free


def memory_and_swap() -> tuple[int, int, int, int]:
    """As psutil's ``virtual_memory()`` (total, available) and ``swap_memory()`` (total, used) give them, from one
    read of /proc/meminfo instead of their three files (meminfo twice and vmstat) each tick."""
    try:
        values = parse_meminfo(read_proc_bytes("/proc/meminfo"))
    except OSError:
        values = None
    if values is not None:
        return values
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    return memory.total, memory.available, swap.total, swap.used


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

    def __init__(
        self,
        nested_pid_namespace: bool | None = None,
        static_refresh_s: float = 5.0,
        pods: PodResolver | None = None,
        slurm: SlurmJobs | None = None,
    ) -> None:
        self.nested_pid_namespace = in_nested_pid_namespace() if nested_pid_namespace is None else nested_pid_namespace
        self.static_refresh_s = static_refresh_s
        self.cgroup_namespace = in_cgroup_namespace()
        self.pods = from_environment() if pods is None else pods
        """Names the pod of a process whose cgroup names one, from what the node offers; it reads on a thread of
        its own, so a slow or refused source never holds up a tick."""
        self.slurm = slurm if slurm is not None else SlurmJobs()
        """Slurm's answers on the jobs that watched processes run in, asked off this thread."""
        self._procs: dict[int, _Tracked] = {}
        self._hostname = socket.gethostname()
        self._cpu_count = psutil.cpu_count() or 1
        # The first reading only starts the measurement window.
        self._cpu_times = read_cpu_times()
        if not self._cpu_times:
            psutil.cpu_percent(None)
            psutil.cpu_percent(None, percpu=True)
        self._cpu_primed = False
        self._scanned: dict[int, tuple[int, int]] = {}
        """Each process's start and CPU time at the last process-table scan (``related``), by PID."""
        self._scanned_at: float | None = None
        self._cpu_takers: CpuTakers | None = None

    def _cpu_percents(self) -> tuple[float, tuple[float, ...]]:
        """The machine's busy share and each core's since the last call, from one read of /proc/stat (psutil
        reads it once for the total and again for the cores); psutil's where /proc/stat cannot be read."""
        before, now = self._cpu_times, read_cpu_times()
        if not before or not now:
            return psutil.cpu_percent(None), tuple(psutil.cpu_percent(None, percpu=True))
        self._cpu_times = now
        return busy_percent(before[0], now[0]), tuple(busy_percent(a, b) for a, b in zip(before[1:], now[1:]))

    def host_info(self) -> HostInfo:
        total, per_core = self._cpu_percents()
        primed, self._cpu_primed = self._cpu_primed, True
        memory_total, memory_available, swap_total, swap_used = memory_and_swap()
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
            memory_total_bytes=memory_total,
            memory_used_bytes=memory_total - memory_available,
            memory_available_bytes=memory_available,
            swap_total_bytes=swap_total,
            swap_used_bytes=swap_used,
            cpu_takers=self._cpu_takers,
        )

    def prime(self, pids: Iterable[int]) -> None:
        """Start the CPU % window for these PIDs, so the next ``processes`` call has a value for them."""
        for pid in pids:
            self._describe(pid)

    def related(self, roots: Iterable[int]) -> set[int]:
        """The roots with their ancestors (below init) and all their descendants, from one process-table scan;
        from the same scan, who used the CPUs since the last one (``HostInfo.cpu_takers``).

        DataLoader workers sit below the training process as children (fork, spawn) or as grandchildren
        under a fork server, so descendants are followed all the way down.
        """
        parent: dict[int, int] = {}
        times: dict[int, tuple[int, int]] = {}
        before = self._scanned
        busy: list[Busy] = []
        now = time.monotonic()
        for entry in os.scandir("/proc"):
            name = entry.name
            if name.isdigit():
                # The parent, the CPU time and the start time, read from the bytes without decoding the line
                # (one stat file per process of the machine, every slow tick).
                try:
                    raw = read_proc_bytes(f"/proc/{name}/stat")
                except OSError:  # exited during the scan
                    continue
                try:
                    fields = raw[raw.rindex(b")") + 2 :].split(None, 20)
                    pid = int(name)
                    parent[pid] = int(fields[1])
                    cpu, start = int(fields[11]) + int(fields[12]), int(fields[19])
                except (ValueError, IndexError):  # not a stat line: the process is left out, not the scan
                    continue
                times[pid] = (start, cpu)
                last = before.get(pid)
                if last is not None and last[0] == start and cpu > last[1]:
                    busy.append((cpu - last[1], pid, raw))
        if self._scanned_at is not None and now > self._scanned_at:
            self._cpu_takers = cpu_takers(busy, now - self._scanned_at)
        self._scanned, self._scanned_at = times, now
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

    @staticmethod
    def elsewhere(pid: int) -> HostProcess:
        """The host side of an NVML PID seen from a PID namespace of its own: a host PID, which names another
        process here or none, so nothing of this namespace's process of that number is read for it
        (docs/security.md)."""
        return HostProcess(pid, visible=False, unavailable=frozen_reasons(dict.fromkeys(_HOST_FIELDS, NOT_VISIBLE)))

    def _describe(self, pid: int) -> HostProcess:
        tracked = self._procs.get(pid)
        try:
            raw = read_proc_bytes(f"/proc/{pid}/stat")
        except (FileNotFoundError, ProcessLookupError):
            self._procs.pop(pid, None)
            return HostProcess(pid, unavailable=frozen_reasons(dict.fromkeys(_HOST_FIELDS, PROCESS_EXITED)))
        except OSError:
            return HostProcess(pid, unavailable=frozen_reasons(dict.fromkeys(_HOST_FIELDS, ACCESS_DENIED)))
        now = time.monotonic()
        # A process that did nothing since the last tick (most of them) has the very same line: not parsed again,
        # and while its record says 0 % and nothing is due for a refresh, that record is this tick's too.
        same = tracked is not None and tracked.stat is not None and raw == tracked.raw
        if same and tracked is not None:
            last = tracked.last
            if (
                last is not None
                and last.slurm == self._slurm_job(tracked.container)
                and last.cpu_percent == 0.0
                and now > tracked.at
                and now < tracked.static_due
                and now < tracked.container_due
                and "pod" not in tracked.container_reasons
            ):
                tracked.at = now
                return last
        stat = tracked.stat if same and tracked is not None and tracked.stat is not None else None
        if stat is None:
            stat = parse_stat(raw.decode(errors="replace"))
        cpu_percent: float | None = None
        if tracked is None or tracked.start_ticks != stat.start_ticks:
            # New, or the PID now names another process: its CPU window starts here.
            tracked = self._procs[pid] = _Tracked(stat.start_ticks, stat.cpu_ticks, now)
        else:
            elapsed = now - tracked.at
            if elapsed > 0:
                cpu_percent = round((stat.cpu_ticks - tracked.cpu_ticks) / CLOCK_TICKS / elapsed * 100, 1)
            tracked.cpu_ticks, tracked.at = stat.cpu_ticks, now
        refreshed = False
        if now >= tracked.static_due:
            tracked.static, tracked.static_reasons = _read_static(pid, zombie=stat.status == "zombie")
            tracked.static_due = now + self.static_refresh_s
            refreshed = True
        if now >= tracked.container_due:
            tracked.container, reason = read_container(pid, self.cgroup_namespace)
            tracked.container_reasons = {} if reason is None else {"container": reason}
            tracked.container_due = now + CONTAINER_REFRESH_S
            refreshed = True
        # A lookup in what the resolver last read, every tick until it names the pod: one that just started is
        # named as soon as the list that holds it is read.
        if refreshed or "pod" in tracked.container_reasons:
            pod, pod_reason = self.pods.lookup(tracked.container)
            reasons_now = {k: v for k, v in tracked.container_reasons.items() if k != "pod"}
            if pod_reason is not None:
                reasons_now["pod"] = pod_reason
            if pod != tracked.pod or reasons_now != tracked.container_reasons:
                tracked.pod, tracked.container_reasons = pod, reasons_now
                refreshed = True
        last = tracked.last
        slurm = self._slurm_job(tracked.container)
        if last is not None and slurm != last.slurm:
            refreshed = True  # Slurm answered since (the job's name, user and GPUs)
        if not refreshed and last is not None and stat == tracked.stat and cpu_percent == last.cpu_percent:
            tracked.raw = raw
            return last  # nothing it is made of changed (a sleeping process): the same record, not a new one
        reasons = {**tracked.static_reasons, **tracked.container_reasons}
        if cpu_percent is None:
            reasons["cpu_percent"] = MEASURING
        tracked.stat, tracked.raw = stat, raw
        tracked.last = HostProcess(
            pid,
            ppid=stat.ppid,
            name=stat.name,
            status=stat.status,
            num_threads=stat.num_threads,
            rss_bytes=stat.rss_bytes,
            cpu_percent=cpu_percent,
            unavailable=frozen_reasons(reasons),
            container=tracked.container,
            pod=tracked.pod,
            slurm=slurm,
            **tracked.static,
        )
        return tracked.last

    def settle(self) -> None:
        """Wait (a few seconds at most) for the answers asked for off the sampling thread: for a snapshot taken
        once (``--once``, ``--json``), which has no later tick to show them: Slurm's jobs and the pod list, against
        one deadline; nothing to wait for where no process is in a Slurm job or a pod."""
        deadline = time.monotonic() + SETTLE_S
        self.slurm.wait(SETTLE_S)
        self.pods.wait(max(0.0, deadline - time.monotonic()))

    def _slurm_job(self, container: Container | None) -> SlurmJob | None:
        """The Slurm job of a process in ``container``, as Slurm has last told it (never waiting for it)."""
        if container is None or container.runtime != "slurm":
            return None
        ids = slurm_ids(container.path.split("/"))
        return None if ids is None else self.slurm.job(*ids)


@dataclass
class _Tracked:
    """A process between ticks: its identity (start time), last CPU reading, and facts that rarely change (read
    again every few seconds: user, command line, start time; its container)."""

    start_ticks: int
    cpu_ticks: int
    at: float
    static: dict[str, Any] = field(default_factory=dict)
    static_reasons: dict[str, str] = field(default_factory=dict)
    static_due: float = 0.0
    container: Container | None = None
    container_reasons: dict[str, str] = field(default_factory=dict)
    container_due: float = 0.0
    pod: Pod | None = None
    stat: ProcStat | None = None
    raw: bytes = b""
    """The text ``stat`` was parsed from: the same bytes at the next tick are not parsed again."""
    last: HostProcess | None = None
    """The record made from ``stat`` at the last tick: given again while nothing it is made of changes."""


MAX_COMMAND_CHARS = 16_384
"""The most of a command line kept: enough for any real one (long Hydra overrides included); a process that
points its arguments at megabytes of its memory would otherwise put them in every snapshot and recording."""


def _command(proc: psutil.Process, zombie: bool) -> str | None:
    """The command line as one line; a kernel thread or a process that cleared its arguments shows ``[name]``.

    Any user can put terminal escapes in their command line or name: they are made visible here, where the text
    enters gputop, so no output ever writes them raw (docs/security.md)."""
    command = " ".join(proc.cmdline()) or (None if zombie else f"[{proc.name()}]")
    if command is None:
        return None
    if len(command) > MAX_COMMAND_CHARS:  # a process can point its arguments at any amount of its own memory
        command = f"{command[:MAX_COMMAND_CHARS]}… ({len(command) - MAX_COMMAND_CHARS} more characters)"
    return printable(command)


def _read_static(pid: int, zombie: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """User, command line and start time: read when a process is first seen and now and then after."""
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            for name, read in (
                ("start_time", proc.create_time),
                ("user", lambda: printable(proc.username())),
                # Another user's command line may carry terminal escapes: shown, never obeyed (docs/security.md).
                ("command", lambda: _command(proc, zombie)),
            ):
                try:
                    values[name] = read()
                except psutil.ZombieProcess:
                    reasons[name] = ZOMBIE
                except psutil.AccessDenied:
                    reasons[name] = ACCESS_DENIED
                except KeyError:  # username() of a UID with no passwd entry (common in containers)
                    values[name] = str(proc.uids().real)
    except psutil.NoSuchProcess:
        pass
    for name in ("start_time", "user", "command"):
        if values.get(name) is None:
            values.pop(name, None)
            reasons.setdefault(name, ZOMBIE if zombie else PROCESS_EXITED)
    return values, reasons
