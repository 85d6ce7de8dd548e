"""What the advisor keeps of each snapshot for one training process: a ``JobSample``, and what builds it.

A sample holds the process's training view with the GPU and host facts the rules need beside it, worked out once
per snapshot: a sample stays in a process's history for minutes and every rule reads it at every tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from gputop.frozen import immutable
from gputop.model import Gpu, GpuProcess, HostInfo, HostProcess, LoaderView, Snapshot, StepAnatomy, TrainingView

CURRENT_BATCHES = 3
CURRENT_S = 1.0


@immutable
class JobSample:
    """One training process at one snapshot, with the GPU and host facts the rules need beside its view.

    ``gpus`` are the GPUs the process holds memory on and ``gpu_rows`` its rows in NVML's process list;
    ``worker_gpu_rows`` are rows of its DataLoader workers (which should hold no CUDA context at all).
    ``local_ranks`` counts the training processes of its job on this host that share the CPUs. ``loader`` is
    the DataLoader the loop iterates now (``current_loader``).
    """

    time: float
    view: TrainingView
    host: HostInfo
    gpus: tuple[Gpu, ...] = ()
    gpu_rows: tuple[GpuProcess, ...] = ()
    worker_gpu_rows: tuple[GpuProcess, ...] = ()
    rss_bytes: int | None = None
    age_s: float | None = None
    local_ranks: int = 1
    loader: LoaderView | None = None
    process: HostProcess | None = None
    """The training process's own host side (its CPU, its user), where the snapshot has it."""

    @property
    def pid(self) -> int:
        return self.view.pid

    @property
    def num_workers(self) -> int | None:
        """Workers of the active DataLoader as it runs (the probe), else the workers seen from outside."""
        loader = self.loader
        if loader is not None:
            for config in (loader.effective, loader.requested):
                if config.num_workers is not None:
                    return config.num_workers
        return len(self.view.workers) if self.view.workers else None

    @property
    def batch_size(self) -> int | None:
        loader = self.loader
        if loader is None:
            return None
        return loader.effective.batch_size if loader.effective.batch_size is not None else loader.requested.batch_size

    @property
    def step(self) -> StepAnatomy | None:
        """Where the job's steps spend their time, from a trusted probe report; None before a step was timed."""
        probe = self.view.probe
        return probe.step if probe.ok else None

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpu_rows)

    # What the rules read from the GPUs, worked out once per sample: a sample stays in the history for minutes
    # and every rule reads these at every tick.
    gpu_busy_percent: float | None = field(init=False, repr=False, compare=False)
    """NVML's GPU busy (any kernel running) of the GPUs the process uses, averaged; None where unknown."""
    sm_activity_percent: float | None = field(init=False, repr=False, compare=False)
    sm_occupancy_percent: float | None = field(init=False, repr=False, compare=False)
    tensor_activity_percent: float | None = field(init=False, repr=False, compare=False)
    gpu_memory_fraction: float | None = field(init=False, repr=False, compare=False)
    """The fullest of its GPUs: used over total memory, every process on it counted."""
    readings: dict[int, object] = field(init=False, repr=False, compare=False, default_factory=dict)
    """What the windows read of this sample, by reader (``Reader.id``): each tick's window reads it again."""

    def __post_init__(self) -> None:
        gpus = self.gpus
        put = object.__setattr__
        if not gpus:  # no GPU: nothing known of any
            for name in _DERIVED:
                put(self, name, None)
            return
        fractions = [g.memory_used_fraction for g in gpus if g.memory_used_fraction is not None]
        put(self, "gpu_busy_percent", mean([g.utilization_gpu_percent for g in gpus]))
        put(self, "sm_activity_percent", mean([g.sm_activity_percent for g in gpus]))
        put(self, "sm_occupancy_percent", mean([g.sm_occupancy_percent for g in gpus]))
        put(self, "tensor_activity_percent", mean([g.tensor_activity_percent for g in gpus]))
        put(self, "gpu_memory_fraction", max(fractions) if fractions else None)

    @property
    def gpu_memory_bytes(self) -> int | None:
        """What NVML says the process holds over all its GPUs."""
        held = [r.gpu_memory_bytes for r in self.gpu_rows if r.gpu_memory_bytes is not None]
        return sum(held) if held else None


_DERIVED = (
    "gpu_busy_percent",
    "sm_activity_percent",
    "sm_occupancy_percent",
    "tensor_activity_percent",
    "gpu_memory_fraction",
)
"""What a sample works out of its GPUs (``JobSample.__post_init__``)."""


def current_loader(view: TrainingView) -> LoaderView | None:
    """The DataLoader the loop iterates now, from the probe.

    None when the loop has not asked it for a batch for a while (``CURRENT_BATCHES`` batch intervals, at least
    ``CURRENT_S``): between phases, or while the job ends, its statistics describe a loop that has moved on.
    """
    loader = view.loader if view.probe.ok else None
    if loader is None or loader.waiting_now_s is not None:
        return loader
    if loader.last_batch_age_s is None or not loader.steps_per_s:
        return None
    current_s = max(CURRENT_S, CURRENT_BATCHES / loader.steps_per_s)
    return loader if loader.last_batch_age_s <= current_s else None


@immutable
class _SnapshotIndex:
    """A snapshot's process rows and host processes by PID: every training process's sample
    looks its own up, and a machine may run thousands of GPU processes."""

    snap: Snapshot
    rows: dict[int, tuple[GpuProcess, ...]]
    hosts: dict[int, HostProcess]


_last_index: _SnapshotIndex | None = None
"""The index of the snapshot last sampled: the views of one snapshot are sampled one after another. A thread that
finds another snapshot's index here builds its own (one reference, read and replaced whole)."""


def _index(snap: Snapshot) -> _SnapshotIndex:
    global _last_index
    index = _last_index
    if index is None or index.snap is not snap:
        rows: dict[int, list[GpuProcess]] = {}
        for row in snap.processes:
            rows.setdefault(row.pid, []).append(row)
        hosts: dict[int, HostProcess] = {}
        for host in snap.host_processes:
            hosts.setdefault(host.pid, host)  # the first, as Snapshot.host_process finds it
        index = _last_index = _SnapshotIndex(snap, {k: tuple(v) for k, v in rows.items()}, hosts)
    return index


def _worker_rows(snap: Snapshot, view: TrainingView, rows: dict[int, tuple[GpuProcess, ...]]) -> tuple[GpuProcess, ...]:
    """The rows of the view's workers in NVML's process list, in its order; ``rows``: the snapshot's rows by PID, which
    tell at once that none is (workers usually hold no CUDA context)."""
    if not view.workers:
        return ()
    workers = {w.pid for w in view.workers}
    if rows.keys().isdisjoint(workers):
        return ()
    return tuple(p for p in snap.processes if p.pid in workers)


def sample_of(snap: Snapshot, view: TrainingView, local_ranks: int = 1) -> JobSample:
    """The advisor's sample of one training process in a snapshot."""
    index = _index(snap)
    rows = index.rows.get(view.pid, ())
    indexes = {r.gpu_index for r in rows}
    host = index.hosts.get(view.pid)
    start = host.start_time if host is not None else None
    return JobSample(
        time=snap.time,
        view=view,
        host=snap.host,
        gpus=tuple(g for g in snap.gpus if g.index in indexes) if indexes else (),
        gpu_rows=rows,
        worker_gpu_rows=_worker_rows(snap, view, index.rows),
        rss_bytes=host.rss_bytes if host is not None else None,
        age_s=None if start is None else max(0.0, snap.time - start),
        local_ranks=max(1, local_ranks),
        loader=current_loader(view),
        process=host,
    )


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the known values; None where none is known."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
