"""Training collector: each training process's DataLoader workers, pin-memory thread and main thread, seen from
outside through /proc, joined with what the in-process probe reports.

Which processes are training processes, and whose workers are whose, is ``job_tree``'s part; the /proc reads
beyond the host collector's are ``procinfo``'s; reading the probe's reports is ``probe_reader``'s.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gputop.collect.job_tree import AGENT_NAME, MAIN_THREAD_NAME, JobTree, start_method_of
from gputop.collect.launch_env import merged, read_environment
from gputop.collect.probe_reader import STALE_AFTER_S, read_report
from gputop.collect.procinfo import (
    main_thread_schedstat,
    main_thread_stat,
    threads_named,
    usable_cpu_count,
    uss_bytes,
    wait_channel,
)
from gputop.collect.procstat import CLOCK_TICKS
from gputop.collect.step_cost import EnergyHistory, step_cost
from gputop.model import (
    EVIDENCE_PROBE,
    MAIN_MIXED,
    MAIN_RUNNING,
    MAIN_WAITING,
    MEASURING,
    PIN_FROM_PROBE,
    PIN_FROM_THREADS,
    PIN_OFF,
    PIN_ON,
    PIN_UNKNOWN,
    PROBE_AWAITED,
    PROBE_LAUNCHER,
    PROBE_OK,
    PROCESS_EXITED,
    ROLE_TORCHRUN_AGENT,
    ROLE_TRAINING,
    CudaMemory,
    Gpu,
    GpuProcess,
    HostProcess,
    Launch,
    MainActivity,
    MainThread,
    PinMemoryStatus,
    PinState,
    ProbeReport,
    TrainingView,
    Worker,
    evidence_of,
    frozen_reasons,
)
from gputop.probe import channel
from gputop.sanitize import printable

PIN_THREAD_NAME = "pt_data_pin"
TORCH_THREAD_PREFIX = "pt_"
"""Threads torch names: ``pt_main_thread``, ``pt_autograd_N`` (a backward pass on a GPU), ``pt_data_pin``..."""

BUSY_TICKS = 10
"""Ticks over which the main thread's busy share is averaged."""
WAITING_BELOW = 0.25
RUNNING_ABOVE = 0.75
SHOWN_DIR_CHARS = 80
"""The end of a long report directory is what tells it apart: a reason shows that much of it."""
USS_REFRESH_S = 5.0
"""USS walks the worker's page tables (``smaps_rollup``): read it on first sight and then this seldom."""


def activity_of(busy_share: float | None) -> MainActivity | None:
    if busy_share is None:
        return None
    if busy_share < WAITING_BELOW:
        return MAIN_WAITING
    if busy_share > RUNNING_ABOVE:
        return MAIN_RUNNING
    return MAIN_MIXED


def pin_status(pin_tids: Sequence[int], num_workers: int, pid: int, probe: ProbeReport) -> PinMemoryStatus:
    """pin_memory on, off or unknown, with the evidence: the pin thread from outside, else the probe's word."""
    loader = probe.active_loader
    note = ""
    if loader is not None and loader.requested.pin_memory and loader.effective.pin_memory is False:
        note = "; pin_memory=True was requested but torch runs without it (no accelerator)"
    if pin_tids:
        tids = ", ".join(str(t) for t in pin_tids)
        return PinMemoryStatus(
            PIN_ON, f"thread {PIN_THREAD_NAME} (TID {tids}) in PID {pid}", PIN_FROM_THREADS, tuple(pin_tids)
        )
    if num_workers:
        plural = "s" if num_workers != 1 else ""
        return PinMemoryStatus(
            PIN_OFF, f"{num_workers} worker{plural} and no {PIN_THREAD_NAME} thread" + note, PIN_FROM_THREADS
        )
    if loader is not None and loader.effective.pin_memory is not None:
        state: PinState = PIN_ON if loader.effective.pin_memory else PIN_OFF
        return PinMemoryStatus(
            state, f"probe: pin_memory={loader.effective.pin_memory} in effect" + note, PIN_FROM_PROBE
        )
    return PinMemoryStatus(
        PIN_UNKNOWN, "no DataLoader workers: without them pinning runs in the main thread, unseen from outside"
    )


@dataclass
class _Job:
    """A training process between ticks, known by its start time (a reused PID is another job)."""

    start_time: float | None = None
    start_ticks: int | None = None
    view: TrainingView | None = None
    main_ticks: int | None = None
    main_wanted_ns: int | None = None
    """The main thread's nanoseconds on a CPU or waiting for one, at ``main_at``."""
    main_at: float | None = None
    busy: deque[float] = field(default_factory=lambda: deque(maxlen=BUSY_TICKS))
    generation: set[int] = field(default_factory=set)
    workers_replaced: int = 0
    pin_tids: tuple[int, ...] = ()
    pin_checked_workers: frozenset[int] | None = None
    usable_cpu_count: int | None = None
    launch: Launch | None = None
    probe_dir: str | None = None
    """Where the probe of the ``gputop run`` that started the process reports (None: not started by one)."""
    environment_read: bool = False
    torch_threads: bool = False
    threads_checked: int | None = -1
    """The thread count at which the threads' names were last read (-1: never)."""


@dataclass
class _Tick:
    """What one ``read`` knows about every view it makes."""

    tree: JobTree
    training: set[int]
    ranks: dict[int, list[int]]
    reporting: set[int]
    unsafe: str | None
    focus_pid: int | None
    gpus: Sequence[Gpu]
    processes: Sequence[GpuProcess]
    slow: bool
    now: float
    watched: dict[int, bool] = field(default_factory=dict)
    """``TrainingCollector._watched`` of each process asked about this tick."""


class TrainingCollector:
    """Turns the host collector's process tree into ``TrainingView`` s. Used from one thread; never raises.

    Watched processes, the focus and those with workers, a probe report or torch's ``pt_main_thread`` name, are
    read every tick; the views of other GPU processes (a box may hold dozens) are remade at the slow cadence only.
    """

    def __init__(
        self, probe_dir: str | None = None, stale_after_s: float = STALE_AFTER_S, uss_refresh_s: float = USS_REFRESH_S
    ) -> None:
        self.probe_dir = probe_dir or channel.report_dir()
        self.stale_after_s = stale_after_s
        self.uss_refresh_s = uss_refresh_s
        self._jobs: dict[int, _Job] = {}
        self._uss: dict[int, tuple[float, int | None, str | None]] = {}
        self._parents: set[int] = set()
        self._probed_workers: set[int] = set()
        self._energy = EnergyHistory()

    def new_pids(self) -> set[int]:
        """Processes to describe at this tick beyond the last tree scan: the children of the watched training
        processes and fork servers seen last tick, and the workers their probes name.

        The tree is rescanned only every couple of seconds, while a non-persistent DataLoader replaces its
        workers at every epoch; this finds the new ones at the next tick, for two small reads per parent.
        """
        found = set(self._probed_workers)
        for pid in self._parents:
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    found.update(int(c) for c in f.read().split())
            except (OSError, ValueError):
                continue
        return found

    def prime(self, pids: Iterable[int]) -> None:
        """Start the main-thread CPU window of these PIDs, so the next ``read`` has a value for them."""
        for pid in pids:
            stat = main_thread_stat(pid)
            if stat is not None:
                job = self._jobs[pid] = _Job(start_time=None, start_ticks=stat.start_ticks)
                job.main_ticks, job.main_wanted_ns = stat.cpu_ticks, main_thread_schedstat(pid)
                job.main_at = time.monotonic()

    def read(
        self,
        roots: Iterable[int],
        hosts: Mapping[int, HostProcess],
        gpus: Sequence[Gpu] = (),
        processes: Sequence[GpuProcess] = (),
        slow: bool = True,
        now: float | None = None,
        focus_pid: int | None = None,
    ) -> tuple[TrainingView, ...]:
        """One view per training process among the roots and their descendants, the roots first in their order."""
        try:
            tick = self._tick(roots, hosts, gpus, processes, slow, time.time() if now is None else now, focus_pid)
            if slow:  # the energy counters are read on the slow cadence: between, they are the last ones again
                self._energy.add(tick.now, gpus)
            root_list = [r for r in dict.fromkeys(roots) if r in tick.training]
            order = root_list + sorted(tick.training - set(root_list))
            views = tuple(self._view(pid, tick) for pid in order)
        except Exception:  # a bug here must cost the training view, not the snapshot
            import logging  # only here: gputop --once imports this module inside its measuring window

            logging.getLogger(__name__).exception("training view failed")
            return ()
        self._forget(tick, views)
        return views

    def final_views(self, views: Sequence[TrainingView], run_id: str) -> tuple[TrainingView, ...]:
        """A finished ``gputop run``'s views with the last report each of its processes wrote (at exit) as their
        probe part. Processes of the run never seen from outside (short-lived, or the dashboard was watching)
        are added with their report alone."""
        if channel.unsafe_reason(self.probe_dir):
            return tuple(views)
        now = time.time()
        reports = {}
        for pid in sorted(_reporting_pids(self.probe_dir)):
            job = self._jobs.get(pid)
            start_ticks = job.start_ticks if job is not None else None
            report = read_report(self.probe_dir, pid, start_ticks, now, float("inf"), run_id)
            if report.status == PROBE_OK:
                reports[pid] = report
        out = [
            dataclasses.replace(v, probe=_keep_nvml_join(v.probe, reports.pop(v.pid))) if v.pid in reports else v
            for v in views
        ]
        out.extend(
            TrainingView(pid=pid, probe=report, launch=report.launch, evidence=(EVIDENCE_PROBE,))
            for pid, report in reports.items()
        )
        return tuple(out)

    def _tick(
        self,
        roots: Iterable[int],
        hosts: Mapping[int, HostProcess],
        gpus: Sequence[Gpu],
        processes: Sequence[GpuProcess],
        slow: bool,
        now: float,
        focus_pid: int | None,
    ) -> _Tick:
        tree = JobTree(hosts, self._probed_workers)
        # No directory yet is the normal state of a machine where no job has run the probe.
        unsafe = channel.unsafe_reason(self.probe_dir) if os.path.lexists(self.probe_dir) else None
        reporting = set() if unsafe else _reporting_pids(self.probe_dir)
        root_list = [r for r in dict.fromkeys(roots) if r in tree.alive and not tree.is_worker(r)]
        training = tree.training_processes(root_list, reporting)
        ranks: dict[int, list[int]] = {}
        parents = tree.training_parents(training)
        for pid in sorted(parents):
            ranks.setdefault(parents[pid], []).append(pid)
        return _Tick(tree, training, ranks, reporting, unsafe, focus_pid, gpus, processes, slow, now)

    def _forget(self, tick: _Tick, views: tuple[TrainingView, ...]) -> None:
        for gone in set(self._jobs) - tick.training:
            del self._jobs[gone]
        watched = {v.pid for v in views if self._watched(v.pid, tick)}
        self._parents = watched | {pid for pid in tick.tree.alive if tick.tree.is_fork_server(pid)}
        self._probed_workers = {p for v in views for loader in v.probe.loaders for p in loader.worker_pids}
        for gone in set(self._uss) - {w.pid for v in views for w in v.workers}:
            del self._uss[gone]

    def _view(self, pid: int, tick: _Tick) -> TrainingView:
        host = tick.tree.alive[pid]
        job = self._jobs.get(pid)
        if job is None or job.start_time not in (None, host.start_time):
            job = self._jobs[pid] = _Job(host.start_time)
        job.start_time = host.start_time  # a primed job learns its start time here
        if not tick.slow and not self._watched(pid, tick) and job.view is not None:
            return job.view
        worker_pids = tick.tree.workers_of(pid)
        main_thread = self._main_thread(pid, job)  # first: it reads the start time the report is checked against
        if not job.environment_read:  # the environment a process was started with does not change
            job.launch, job.probe_dir = read_environment(pid)
            job.environment_read = True
        probe = self._probe(pid, job, tick, agent=host.name == AGENT_NAME)
        ids = {p: i for loader in probe.loaders for i, p in enumerate(loader.worker_pids)}
        workers = tuple(self._worker(tick.tree.alive[w], ids.get(w), tick.now) for w in worker_pids)
        self._track_generations(job, set(worker_pids))
        if tick.slow or job.usable_cpu_count is None:
            job.usable_cpu_count = usable_cpu_count(pid)
        if tick.slow or job.pin_checked_workers != frozenset(worker_pids):
            job.pin_tids = threads_named(pid, PIN_THREAD_NAME) if worker_pids else ()
            job.pin_checked_workers = frozenset(worker_pids)
        cpu = [w.host.cpu_percent for w in workers if w.host.cpu_percent is not None]
        launch = merged(job.launch, probe.launch)
        if not job.torch_threads and host.name != AGENT_NAME and job.threads_checked != host.num_threads:
            # Read the threads' names again only when their number changed: torch names a thread as it starts it.
            job.torch_threads = host.name == MAIN_THREAD_NAME or bool(threads_named(pid, TORCH_THREAD_PREFIX))
            job.threads_checked = host.num_threads
        parent = tick.tree.alive.get(host.ppid) if host.ppid is not None else None
        ranked = (launch is not None and launch.rank is not None) or (parent is not None and parent.name == AGENT_NAME)
        evidence = evidence_of(probe.status, bool(workers or job.workers_replaced), ranked, job.torch_threads)
        job.view = TrainingView(
            pid=pid,
            role=ROLE_TORCHRUN_AGENT if host.name == AGENT_NAME else ROLE_TRAINING,
            name=host.name,
            ranks=tuple(tick.ranks.get(pid, ())),
            workers=workers,
            worker_start_method=start_method_of(tick.tree.alive[worker_pids[0]]) if worker_pids else None,
            workers_cpu_percent=round(sum(cpu), 1) if cpu else None,
            usable_cpu_count=job.usable_cpu_count,
            workers_replaced=job.workers_replaced,
            pin_memory=pin_status(job.pin_tids, len(workers), pid, probe),
            main_thread=main_thread,
            probe=probe,
            launch=launch,
            evidence=evidence,
            cost=step_cost(pid, {pid, *worker_pids}, probe, tick.gpus, tick.processes, self._energy),
        )
        return job.view

    @staticmethod
    def _watched(pid: int, tick: _Tick) -> bool:
        known = tick.watched.get(pid)
        if known is not None:
            return known
        host = tick.tree.alive[pid]
        watched = tick.watched[pid] = (
            pid == tick.focus_pid
            or pid in tick.reporting
            or host.name == MAIN_THREAD_NAME
            or bool(tick.tree.workers_of(pid))
        )
        return watched

    def _probe(self, pid: int, job: _Job, tick: _Tick, agent: bool) -> ProbeReport:
        if tick.unsafe:
            return ProbeReport(reason=tick.unsafe)
        if pid not in tick.reporting:
            return self._no_report(job, agent)
        probe = read_report(self.probe_dir, pid, job.start_ticks, tick.now, self.stale_after_s)
        if probe.status == PROBE_OK and probe.cuda:
            probe = dataclasses.replace(probe, cuda=_join_nvml(pid, probe, tick.gpus, tick.processes))
        return probe

    def _no_report(self, job: _Job, agent: bool) -> ProbeReport:
        """No report from this process: for one that ``gputop run`` started, the probe's first is on its way, to
        this gputop's directory or to another one; torchrun's agent never writes one (its ranks do)."""
        if job.probe_dir is None:
            return ProbeReport()
        if agent:
            return ProbeReport(reason=PROBE_LAUNCHER)
        if os.path.normpath(job.probe_dir) == os.path.normpath(self.probe_dir):
            return ProbeReport(reason=PROBE_AWAITED)
        directory = printable(job.probe_dir)
        if len(directory) > SHOWN_DIR_CHARS:
            directory = "…" + directory[-SHOWN_DIR_CHARS:]
        return ProbeReport(
            reason=f"gputop run started it with the probe reporting to {directory}, not here: "
            f"GPUTOP_PROBE_DIR={directory} gputop reads them"
        )

    def _worker(self, host: HostProcess, worker_id: int | None, now: float) -> Worker:
        """The worker of this host process: its host values stay in ``host``, the worker's own beside it."""
        reasons: dict[str, str] = {}
        due, uss, uss_reason = self._uss.get(host.pid, (0.0, None, None))
        if time.monotonic() >= due:
            uss, uss_reason = uss_bytes(host.pid)
            self._uss[host.pid] = (time.monotonic() + self.uss_refresh_s, uss, uss_reason)
        if uss_reason:
            reasons["uss_bytes"] = uss_reason
        if host.start_time is None:
            reasons["age_s"] = host.unavailable.get("start_time", MEASURING)
        return Worker(
            host=host,
            worker_id=worker_id,
            uss_bytes=uss,
            age_s=None if host.start_time is None else max(0.0, now - host.start_time),
            unavailable=frozen_reasons(reasons),
        )

    def _main_thread(self, pid: int, job: _Job) -> MainThread:
        """Sample the main thread: its own CPU time since the last sample (``/proc/PID/stat`` sums all threads),
        its time on a CPU or waiting for one, its state, and where it sleeps."""
        stat = main_thread_stat(pid)
        if stat is None:
            return MainThread(unavailable=frozen_reasons({"status": PROCESS_EXITED}))
        job.start_ticks = stat.start_ticks
        reasons: dict[str, str] = {}
        wanted = main_thread_schedstat(pid)
        at = time.monotonic()
        cpu_percent = None
        if job.main_ticks is not None and job.main_at is not None and at > job.main_at:
            span = at - job.main_at
            share = (stat.cpu_ticks - job.main_ticks) / CLOCK_TICKS / span
            cpu_percent = round(max(0.0, share) * 100, 1)
            # Busy is on a CPU or waiting in a run queue for one: where other processes hold the CPUs, a loop that
            # never sleeps gets a fraction of a core, and its CPU time alone would make it look half asleep.
            if wanted is not None and job.main_wanted_ns is not None:
                share = (wanted - job.main_wanted_ns) / 1e9 / span
            job.busy.append(min(1.0, max(0.0, share)))
        else:
            reasons["cpu_percent"] = MEASURING
        job.main_ticks, job.main_wanted_ns, job.main_at = stat.cpu_ticks, wanted, at
        busy = sum(job.busy) / len(job.busy) if job.busy else None
        if busy is None:
            reasons["busy_share"] = MEASURING
        return MainThread(
            status=stat.status,
            wait_channel=wait_channel(pid) if stat.status in ("sleeping", "disk-sleep") else None,
            cpu_percent=cpu_percent,
            busy_share=None if busy is None else round(busy, 3),
            activity=activity_of(busy),
            unavailable=frozen_reasons(reasons),
        )

    def _track_generations(self, job: _Job, current: set[int]) -> None:
        """Count whole worker sets replaced by new processes (non-persistent workers, at every epoch)."""
        if not current:
            return
        if job.generation and not (job.generation & current):
            job.workers_replaced += 1
            job.generation = set(current)
        else:
            job.generation |= current


def _reporting_pids(directory: str) -> set[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {pid for pid in map(channel.report_pid, names) if pid is not None}


def _join_nvml(
    pid: int, probe: ProbeReport, gpus: Sequence[Gpu], processes: Sequence[GpuProcess]
) -> tuple[CudaMemory, ...]:
    """Give each CUDA device of the probe its NVML index (by UUID) and what NVML says the process holds there."""
    by_uuid = {_plain_uuid(g.uuid): g.index for g in gpus if g.uuid}
    held = {p.gpu_index: p.gpu_memory_bytes for p in processes if p.pid == pid}
    out = []
    for device in probe.cuda:
        index = by_uuid.get(_plain_uuid(device.uuid)) if device.uuid else None
        out.append(
            dataclasses.replace(device, gpu_index=index, nvml_process_bytes=None if index is None else held.get(index))
        )
    return tuple(out)


def _keep_nvml_join(live: ProbeReport | None, last: ProbeReport) -> ProbeReport:
    """The job's last report, with what the live view had joined from NVML for each of its CUDA devices (the NVML
    index, matched by UUID, and what NVML said the process held there): once the job has exited, NVML lists it
    no more, and the report alone would lose which GPU each device was."""
    joined = {d.device: d for d in live.cuda} if live is not None else {}
    cuda = []
    for device in last.cuda:
        seen = joined.get(device.device)
        if seen is not None and seen.uuid == device.uuid:
            device = dataclasses.replace(device, gpu_index=seen.gpu_index, nvml_process_bytes=seen.nvml_process_bytes)
        cuda.append(device)
    return dataclasses.replace(last, cuda=tuple(cuda))


def _plain_uuid(uuid: str | None) -> str:
    text = (uuid or "").lower()
    return text[4:] if text.startswith("gpu-") else text
