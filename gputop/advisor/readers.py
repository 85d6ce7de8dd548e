"""Readers: what the rules read of each sample, declared once so that the windows can keep what each one gave.

A window's statistics (a median, a share, sums) are kept per reader: on each sample, what the reader gave for it,
and in the lineage that brings a process's windows forward tick by tick, what was worked out of those values. A
reader's ``id`` is what they are kept by. Every reader is a ``Reader`` made once, at the top of a module, one per
statistic a rule reads (or once per key by a ``ReaderFamily``, itself made once): the window's statistics take
nothing else, so a function in its place is a type error, not a reading that cannot be kept.

The readers several rules share are here; a reader only one rule needs is declared at the top of that rule's
module.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from gputop.advisor.samples import JobSample, mean
from gputop.model import Phase

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
K = TypeVar("K", bound=Hashable)

_ids = itertools.count()


class Reader(Generic[T_co]):
    """One number (or flag, or tuple) a rule reads of every sample of a window: ``read`` is pure, ``name`` says
    what it reads, and ``id`` is the number the samples and lineages keep its values by."""

    __slots__ = ("id", "name", "read")

    def __init__(self, name: str, read: Callable[[JobSample], T_co]) -> None:
        self.id = next(_ids)
        self.name = name
        self.read = read

    def __repr__(self) -> str:
        return f"Reader({self.name!r})"


class ReaderFamily(Generic[K, T]):
    """Readers of one statistic for each of several keys (a CUDA device's figure, for each device), each made the
    first time its key is asked for and kept: the same key gives the same reader, whose values the windows kept.

    Keys come from what processes report, so at most ``limit`` are kept: past them the family starts again, and a
    key asked for after that gets a new reader, read anew.
    """

    __slots__ = ("_made", "limit", "name", "read")

    def __init__(self, name: str, read: Callable[[K, JobSample], T], limit: int = 1024) -> None:
        self.name = name
        self.read = read
        self.limit = limit
        self._made: dict[K, Reader[T]] = {}

    def __call__(self, key: K) -> Reader[T]:
        found = self._made.get(key)
        if found is None:
            if len(self._made) >= self.limit:
                self._made.clear()
            read = self.read
            found = self._made[key] = Reader(f"{self.name} {key}", lambda sample: read(key, sample))
        return found


DATA_WAIT_SHARE = Reader("data_wait_share", lambda s: s.loader.data_wait_share if s.loader is not None else None)
"""The share of each step the loop waits for its next batch, from the probe (of the DataLoader it iterates now)."""
STEPS_PER_S = Reader("steps_per_s", lambda s: s.loader.steps_per_s if s.loader is not None else None)
WORKER_BATCH_S = Reader("worker_batch_s", lambda s: s.loader.worker_batch_s if s.loader is not None else None)
WORKER_BATCH_P95_S = Reader(
    "worker_batch_p95_s", lambda s: s.loader.worker_batch_p95_s if s.loader is not None else None
)
"""Seconds one DataLoader worker spends on one batch, timed in the worker by the probe."""
PASS_START_WAIT_SHARE = Reader(
    "pass_start_wait_share", lambda s: s.loader.pass_start_wait_share if s.loader is not None else None
)
"""The share of the time the loop waits for a pass's (an epoch's) first batch."""

GPU_BUSY = Reader("gpu_busy_percent", lambda s: s.gpu_busy_percent)
SM_ACTIVITY = Reader("sm_activity_percent", lambda s: s.sm_activity_percent)
SM_OCCUPANCY = Reader("sm_occupancy_percent", lambda s: s.sm_occupancy_percent)
TENSOR_ACTIVITY = Reader("tensor_activity_percent", lambda s: s.tensor_activity_percent)
GPU_MEMORY_FRACTION = Reader("gpu_memory_fraction", lambda s: s.gpu_memory_fraction)

MAIN_THREAD_BUSY = Reader("main thread busy_share", lambda s: s.view.main_thread.busy_share)
MAIN_THREAD_CPU = Reader("main thread cpu_percent", lambda s: s.view.main_thread.cpu_percent)
"""The main thread's own time on a CPU, in % of a core: its busy share less this is its time waiting for one."""
MAIN_THREAD_RUNNING = Reader(
    "main thread running",
    lambda s: None if s.view.main_thread.status is None else s.view.main_thread.status == "running",
)
"""Whether the main thread was runnable (state R), where its state is known."""

WORKERS_CPU = Reader("workers_cpu_percent", lambda s: s.view.workers_cpu_percent)
WORKER_USS = Reader(
    "worker uss_bytes",
    lambda s: mean([w.uss_bytes for w in s.view.workers if w.uss_bytes is not None]) if s.view.workers else None,
)
"""The workers' own memory (USS), averaged over the workers that report it."""

HOST_CPU = Reader("host cpu_percent", lambda s: s.host.cpu_percent)


def _phase_s(phase: Phase, sample: JobSample) -> float | None:
    step = sample.step
    return None if step is None else step.phase_s(phase)


def _phase_share(phase: Phase, sample: JobSample) -> float | None:
    step = sample.step
    if step is None:
        return None
    seconds = step.phase_s(phase)
    total = step.phase_total_s
    return seconds / total if seconds is not None and total > 0 else None


HAS_STEP = Reader("step timed", lambda s: s.step is not None)
"""Whether the sample carries the probe's step anatomy."""
STEP_S = Reader("step_s", lambda s: s.step.step_s if s.step is not None else None)
"""The median step of the probe's window."""
STEP_MEAN_S = Reader("step mean_s", lambda s: s.step.phase_total_s or None if s.step is not None else None)
"""The mean step: its phases added up."""
PHASE_S = ReaderFamily("step phase_s", _phase_s)
"""The mean seconds a step spends in one phase, by phase; None where the probe did not see it."""
PHASE_SHARE = ReaderFamily("step phase share", _phase_share)
"""The share of the mean step one phase takes, by phase."""
