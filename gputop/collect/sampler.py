"""Turning the collectors' readings into snapshots: once, or every interval on a background thread.

NVML and psutil are only ever called from the thread that owns the ``SnapshotMaker``: the sampler's own thread
for the dashboard, the main thread for ``--once``. Subscribers receive finished, immutable snapshots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Literal

from gputop.collect.nvml import NvmlCollector
from gputop.limits import ONE_SHOT_WINDOW_S
from gputop.model import GpuProcess, HostProcess, Snapshot

if TYPE_CHECKING:
    import logging

    from gputop.collect.host import HostCollector
    from gputop.collect.training import TrainingCollector

SLOW_INTERVAL_S = 2.0
"""Process lists, per-process utilization and PCIe throughput are read at most this often (NVML's PCIe
counter alone blocks for about 20 ms per GPU)."""

RATE_WINDOW_S = 0.1
"""The shortest window over which ``SnapshotMaker.one_shot`` measures CPU % (NVML's GPM asks as much)."""


def namespace_notice(processes: list[GpuProcess]) -> str | None:
    """Explain GPU processes whose PIDs this PID namespace cannot see, with the remedy."""
    hidden = len({p.pid for p in processes if not p.visible})
    if not hidden:
        return None
    return (
        f"{hidden} GPU process{'es' if hidden != 1 else ''} not visible from this PID namespace "
        "(NVML reports host PIDs): run gputop on the host, or start the container with --pid=host."
    )


def with_host(row: GpuProcess, host: HostProcess) -> GpuProcess:
    """NVML's row with its host side: every field spelled out, a third of what ``dataclasses.replace`` costs."""
    return GpuProcess(
        row.pid,
        row.gpu_index,
        row.kind,
        row.gpu_memory_bytes,
        row.sm_percent,
        row.memory_bandwidth_percent,
        host,
        row.unavailable,
        row.mig_index,
        row.gpu_instance_id,
        row.compute_instance_id,
    )


class SnapshotMaker:
    """Owns the collectors and makes one snapshot per call. Not thread-safe: use it from one thread."""

    def __init__(
        self,
        focus_pid: int | None = None,
        slow_interval_s: float = SLOW_INTERVAL_S,
        nvml: NvmlCollector | None = None,
        host: HostCollector | None = None,
        training: TrainingCollector | None = None,
    ) -> None:
        self.focus_pid = focus_pid
        self.nvml = nvml or NvmlCollector()
        self._host = host
        self._training = training
        self.slow_interval_s = slow_interval_s
        self._last_slow = -float("inf")
        self._related: set[int] = set()
        self._joined: dict[tuple[int, int], tuple[GpuProcess, HostProcess, GpuProcess]] = {}
        """Last tick's rows with their host side, by (PID, GPU): NVML's row and the host record, when neither
        changed, give the same joined row again. Holds this tick's rows only."""

    @property
    def host(self) -> HostCollector:
        """The host side, made (and its modules imported) when first used: ``one_shot`` takes the first GPM sample
        before, so that importing them falls inside the window."""
        if self._host is None:
            from gputop.collect.host import HostCollector

            self._host = HostCollector()
        return self._host

    @property
    def training(self) -> TrainingCollector:
        """The training collector, made (and its modules imported) when first used, as ``host``."""
        if self._training is None:
            from gputop.collect.training import TrainingCollector

            self._training = TrainingCollector()
        return self._training

    def start(self) -> None:
        self.nvml.start()

    def close(self) -> None:
        self.nvml.close()

    def snapshot(self, force_slow: bool = False) -> Snapshot:
        now = time.monotonic()
        slow = force_slow or now - self._last_slow >= self.slow_interval_s
        if slow:
            self._last_slow = now
        gpus, gpu_processes = self.nvml.read(slow)
        gpu_pids = {p.pid for p in gpu_processes}
        local = self._local_gpu_pids(gpu_pids)
        if slow:
            self._related = self.host.related(self._roots(local))
        hosts = self.host.processes(self._related | local | self.training.new_pids())
        # NVML's PIDs that are no process of this namespace stand for themselves, even where a local process has
        # the same number: every join by PID below (tree, training views, jobs, signals) then leaves them alone.
        hosts.update((pid, self.host.elsewhere(pid)) for pid in gpu_pids - local)
        processes = self._join(gpu_processes, hosts)
        notices = list(self.nvml.notices)
        hidden = namespace_notice(processes)
        if hidden:
            notices.append(hidden)
        stamp = time.time()
        focus_first = ([self.focus_pid] if self.focus_pid is not None else []) + sorted(local)
        training = self.training.read(focus_first, hosts, gpus, processes, slow, stamp, self.focus_pid)
        return Snapshot(
            time=stamp,
            host=self.host.host_info(),
            driver=self.nvml.driver,
            gpus=tuple(gpus),
            processes=tuple(processes),
            host_processes=tuple(hosts[pid] for pid in sorted(hosts)),
            focus_pid=self.focus_pid,
            notices=tuple(notices),
            training=training,
        )

    def _local_gpu_pids(self, gpu_pids: set[int]) -> set[int]:
        """The NVML PIDs that name processes of this PID namespace: all of them on the host, none in a namespace of
        its own (a container without ``--pid=host``), where NVML's host PIDs name other processes here or none."""
        return set() if self.host.nested_pid_namespace else gpu_pids

    def _roots(self, local_gpu_pids: set[int]) -> set[int]:
        """Whose ancestors and descendants are watched: the local GPU processes and the focus."""
        return local_gpu_pids if self.focus_pid is None else local_gpu_pids | {self.focus_pid}

    def _join(self, rows: list[GpuProcess], hosts: dict[int, HostProcess]) -> list[GpuProcess]:
        """Each NVML row with its host side. NVML's rows are reused between slow ticks and a sleeping process keeps
        its host record, so most ticks find the joined row of the last one."""
        before, joined = self._joined, {}
        out = []
        for row in rows:
            host = hosts[row.pid]
            key = (row.pid, row.gpu_index)
            last = before.get(key)
            done = last[2] if last is not None and last[0] is row and last[1] is host else with_host(row, host)
            joined[key] = (row, host, done)
            out.append(done)
        self._joined = joined
        return out

    def one_shot(self, window_s: float = ONE_SHOT_WINDOW_S, during: Callable[[], object] | None = None) -> Snapshot:
        """A single snapshot whose rates (CPU %, SM activity) cover a short window instead of being unknown.

        The window is just over the 100 ms that NVML asks between two GPM samples. The host and training collectors
        are made (their modules imported) after the first GPM sample, inside that window; their CPU windows, which
        start after that, still last at least ``RATE_WINDOW_S``. ``during``, if given, is called in the window too
        (the caller's own start-up: importing what writes the snapshot).
        """
        self.start()
        started = time.monotonic()
        _, first = self.nvml.read(slow=True)
        host, training = self.host, self.training
        related = host.related(self._roots(self._local_gpu_pids({p.pid for p in first})))
        host.prime(related)
        training.prime(related)
        host.host_info()
        primed = time.monotonic()  # every CPU window has started: the processes', the main threads', the machine's
        if during is not None:
            during()
        now = time.monotonic()
        remaining = max(window_s - (now - started), RATE_WINDOW_S - (now - primed))
        if remaining > 0:
            time.sleep(remaining)
        host.settle()  # one snapshot, printed once: with the jobs' names Slurm gives, not "asking"
        return self.snapshot(force_slow=True)


Subscriber = Callable[[Snapshot], object]
"""Called with each snapshot on the sampler thread; what it returns is ignored."""


class Sampler:
    """Makes a snapshot every ``interval_s`` on its own thread and hands it to every subscriber.

    A subscriber that raises is logged and kept; the sampling goes on.
    """

    def __init__(
        self,
        interval_s: float = 1.0,
        maker_factory: Callable[[], SnapshotMaker] = SnapshotMaker,
        first: Snapshot | None = None,
    ) -> None:
        """``maker_factory`` runs on the sampling thread, so NVML is initialised there. ``first``: a snapshot the
        maker has already made (the dashboard's plain first frame), handed on as the first one instead of making
        another at once (at 2,000 processes a first snapshot costs a second of CPU)."""
        self.interval_s = interval_s
        self._maker_factory = maker_factory
        self._first = first
        self._subscribers: list[Subscriber] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.latest: Snapshot | None = None

    def subscribe(self, callback: Subscriber) -> None:
        self._subscribers.append(callback)

    def set_interval(self, interval_s: float) -> None:
        """Change the interval; the next snapshot follows the new one at once."""
        self.interval_s = interval_s
        self._wake.set()

    def start(self) -> None:
        """Start sampling. A snapshot already made (``first``) reaches the subscribers before this returns, on the
        caller's thread: the dashboard has it for its first frame instead of when the sampling thread first runs,
        which under load can be a frame or two later."""
        if self._thread is not None:
            return
        first, self._first = self._first, None
        if first is not None:
            self._hand_on(first)
        since = time.monotonic() if first is not None else None
        self._thread = threading.Thread(target=self._run, args=(since,), name="gputop-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sampling and wait for the thread's last tick and the maker's close (at most ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            self._thread = None

    def _hand_on(self, snap: Snapshot) -> None:
        self.latest = snap
        for callback in list(self._subscribers):
            try:
                callback(snap)
            except Exception:
                _log().exception("snapshot subscriber failed")

    def _run(self, first_handed_on: float | None) -> None:
        """The sampling loop; ``first_handed_on``: when ``start`` handed on the first snapshot, so the next one
        is made an interval after it."""
        maker = self._maker_factory()
        try:
            maker.start()
            if first_handed_on is not None:
                self._wait(first_handed_on)
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    snap = maker.snapshot()
                except Exception:  # a collector bug must not end sampling for good
                    _log().exception("snapshot failed")
                else:
                    self._hand_on(snap)
                self._wait(started)
        finally:
            maker.close()

    def _wait(self, since: float) -> None:
        """Until an interval after ``since``, or a new interval, or ``stop``."""
        self._wake.clear()
        self._wake.wait(max(0.0, self.interval_s - (time.monotonic() - since)))


def _log() -> logging.Logger:
    import logging  # here: gputop --once, which never logs, imports it only after its first GPM sample

    return logging.getLogger(__name__)


def _sleep(timeout_s: float) -> bool:
    time.sleep(timeout_s)
    return False


def every(
    interval_s: float,
    *,
    focus_pid: int | None = None,
    maker: SnapshotMaker | None = None,
    first: Literal["one_shot", "now", "later"] = "one_shot",
    count: int | None = None,
    duration_s: float | None = None,
    wait: Callable[[float], bool] = _sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[Snapshot, None, None]:
    """Snapshots every ``interval_s``, made on the calling thread: ``gputop stream``, ``record``, ``report --pid``
    and ``run``'s watch of its job.

    Each snapshot is due ``interval_s`` after the previous one's ``time``, however long the caller took with it.
    The first is a ``one_shot`` (rates over a short window), a plain snapshot ``now``, or one taken ``later``,
    after a first wait of ``interval_s``. It stops after ``count`` snapshots; after ``duration_s`` (on ``clock``,
    from the call), the last snapshot taken when it is up; or when ``wait(timeout_s)``, which waits between two
    snapshots (default: sleeps), returns True (``threading.Event.wait``, a child process's exit). The maker, a new
    one for ``focus_pid`` unless one is given, is closed at the end: close the iterator (``contextlib.closing``)
    when leaving it early.
    """
    started = clock()
    maker = maker if maker is not None else SnapshotMaker(focus_pid=focus_pid)
    try:
        if first == "one_shot":
            snap = maker.one_shot()
        else:
            maker.start()
            if first == "later" and wait(interval_s):
                return
            snap = maker.snapshot()
        taken = 0
        while True:
            yield snap
            taken += 1
            if count is not None and taken >= count:
                return
            timeout_s = max(0.0, interval_s - (time.time() - snap.time))
            if duration_s is not None:
                left_s = duration_s - (clock() - started)
                if left_s <= 0:
                    return
                timeout_s = min(timeout_s, left_s)
            if wait(timeout_s):
                return
            snap = maker.snapshot()
    finally:
        maker.close()
