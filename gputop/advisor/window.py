"""What the advisor keeps of each snapshot for one training process, and statistics over a window of them.

Rules never read a single snapshot's value as the truth: they take medians, shares and fitted trends over the
last ``window_s`` seconds, so one odd tick neither raises nor clears a finding.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from gputop.model import Gpu, GpuProcess, HostInfo, HostProcess, LoaderView, Snapshot, TrainingView

DEFAULT_WINDOW_S = 20.0
IDLE_WINDOWS = 3
"""``gpu-idle`` waits this many windows (60 s by default): checkpoints and evaluations pause a GPU for a while."""
MIN_SAMPLES = 3
"""Fewer samples than this are no window at all."""
STEADY_R2 = 0.9
"""A linear fit explaining 90 % of the variance is a steady trend, not noise (gputop)."""
FORGET_TICKS = 100
"""A window's column or derived window not used for this many ticks is forgotten (``Lineage.next_tick``)."""
CURRENT_BATCHES = 3
CURRENT_S = 1.0
MAX_HISTORY_SAMPLES = 2048
"""The most samples the advisor keeps of one process (gputop). Its rules read every sample of a window at every
tick, so a history of n samples costs n at each of its ticks: snapshots closer together than the history's
span divided by this are thinned (``AdvisorConfig.min_gap_s``), and a history whose times go back and forth
keeps its newest samples up to this count. The default window's 90 s of history reach it at one snapshot
every 44 ms, below the sampler's shortest interval (0.1 s): only a window over 45 s at 0.1 s (over 7 minutes
at 1 s), or a recording with rows closer than any sampler writes them, is thinned."""


@dataclass(frozen=True, slots=True)
class AdvisorConfig:
    """How long the advisor looks before it speaks.

    ``window_s`` is both the span the rules' statistics cover and how long a condition must hold before its
    finding is raised (and stop holding before it is cleared). ``idle_s`` is how long a GPU must sit idle for
    ``gpu-idle``; it defaults to three windows. Tests use windows of a few seconds.
    """

    window_s: float = DEFAULT_WINDOW_S
    idle_s: float | None = None

    @property
    def gpu_idle_s(self) -> float:
        return self.idle_s if self.idle_s is not None else IDLE_WINDOWS * self.window_s

    @property
    def history_s(self) -> float:
        """How much history the advisor keeps per process: enough for the longest rule."""
        return max(self.window_s, self.gpu_idle_s) * 1.5

    @property
    def min_gap_s(self) -> float:
        """The shortest time between two snapshots the advisor judges: one closer to the last one judged is left
        out, and the findings stand as they were, so a history holds at most ``MAX_HISTORY_SAMPLES``."""
        return self.history_s / MAX_HISTORY_SAMPLES


@dataclass(frozen=True, slots=True)
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
    """What ``JobWindow`` reads of this sample, by reader (``reader_key``): each tick's window reads it again."""

    def __post_init__(self) -> None:
        gpus = self.gpus
        fractions = [g.memory_used_fraction for g in gpus if g.memory_used_fraction is not None]
        derived = (
            ("gpu_busy_percent", _mean([g.utilization_gpu_percent for g in gpus])),
            ("sm_activity_percent", _mean([g.sm_activity_percent for g in gpus])),
            ("sm_occupancy_percent", _mean([g.sm_occupancy_percent for g in gpus])),
            ("tensor_activity_percent", _mean([g.tensor_activity_percent for g in gpus])),
            ("gpu_memory_fraction", max(fractions) if fractions else None),
        )
        for name, value in derived:
            object.__setattr__(self, name, value)

    @property
    def gpu_memory_bytes(self) -> int | None:
        """What NVML says the process holds over all its GPUs."""
        held = [r.gpu_memory_bytes for r in self.gpu_rows if r.gpu_memory_bytes is not None]
        return sum(held) if held else None


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


@dataclass(frozen=True, slots=True)
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


def _worker_rows(snap: Snapshot, view: TrainingView) -> tuple[GpuProcess, ...]:
    if not view.workers:
        return ()
    workers = {w.pid for w in view.workers}
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
        gpus=tuple(g for g in snap.gpus if g.index in indexes),
        gpu_rows=rows,
        worker_gpu_rows=_worker_rows(snap, view),
        rss_bytes=host.rss_bytes if host is not None else None,
        age_s=None if start is None else max(0.0, snap.time - start),
        local_ranks=max(1, local_ranks),
        loader=current_loader(view),
        process=host,
    )


Read = Callable[[JobSample], "float | None"]
T = TypeVar("T")
_UNREAD = object()


_READER_IDS: dict[Hashable, int] = {}
_NEXT_READER_ID = itertools.count()
MAX_READERS = 4096
"""Readers remembered before the table starts again (a rule whose lambdas close over each tick's values would
otherwise grow it for ever); a reader seen again after that gets a new number and is read anew."""


_CODE_READERS: dict[int, tuple[object, int]] = {}
"""The numbers of readers without a closure by their code's id (with the code, which an id alone cannot tell
apart from a later code object's): a rule's lambda is a new function at every tick, but always the same code."""


_FIXED_READERS: dict[int, tuple[object, int]] = {}
"""Readers made once for good (``fixed_reader``), by their id, with their numbers."""


def fixed_reader(read: Callable[[JobSample], T]) -> Callable[[JobSample], T]:
    """Gives ``read`` a number of its own for good: a reader made once and kept (a module's, or one made once per
    name) is then told apart at the cost of one look-up."""
    _FIXED_READERS[id(read)] = (read, next(_NEXT_READER_ID))
    return read


def reader_key(read: Callable[..., object]) -> int | None:
    """A number for a reader, the same across calls for the same code closing over equal values (a rule builds
    its lambdas anew at every tick); None for a reader that cannot be told apart that way, never cached. A number
    is a cheaper key than the reader for the samples' readings."""
    fixed = _FIXED_READERS.get(id(read))
    if fixed is not None and fixed[0] is read:
        return fixed[1]
    try:
        cells = read.__closure__
        code = read.__code__
    except AttributeError:  # not a plain function
        return None
    if cells is None:
        known = _CODE_READERS.get(id(code))
        if known is not None and known[0] is code:
            return known[1]
    try:
        key = (code, tuple(c.cell_contents for c in cells) if cells else ())
        number = _READER_IDS.get(key)
    except (TypeError, ValueError):  # an unhashable or empty cell
        return None
    if number is None:
        if len(_READER_IDS) >= MAX_READERS:
            _READER_IDS.clear()
            _CODE_READERS.clear()
        number = _READER_IDS[key] = next(_NEXT_READER_ID)
    if cells is None:
        _CODE_READERS[id(code)] = (code, number)
    return number


class _Column:
    """What one reader gave for the samples of a lineage's last window, and what was worked out of it: the values
    in order (for the median), the known and true values (for a share), the sums (for totals), each with the
    samples it stands for."""

    __slots__ = ("known", "ordered", "ordered_of", "samples", "seen", "sums", "sums_of", "tally_of", "true", "values")

    def __init__(self, samples: tuple[JobSample, ...], values: list[object], seen: int) -> None:
        self.seen = seen
        """The tick it was last brought forward in (``Lineage.tick``)."""
        self.samples = samples
        self.values = values
        self.ordered: list[float] = []
        self.ordered_of: tuple[JobSample, ...] | None = None
        self.known = self.true = 0
        self.tally_of: tuple[JobSample, ...] | None = None
        self.sums: list[int] = []
        self.sums_of: tuple[JobSample, ...] | None = None


_NOTHING: list[object] = []


class Lineage:
    """The windows one process's history gives, tick after tick, and what was read of them.

    Each tick's window is the last one with samples dropped at its start and added at its end, so what a reader
    gave for it (its column) and what was worked out of that (the values in order for the median, counts, sums)
    are updated by what changed instead of read anew. A window derived the same way at every tick
    (``JobWindow.last``, ``JobWindow.where``) has a lineage of its own, a child of its parent's. ``ordered``: the
    samples' times never go back, so the last seconds of a window are found by bisection.
    """

    __slots__ = ("children", "columns", "findings", "ordered", "tick")

    def __init__(self) -> None:
        self.tick = 0
        """Counts the windows of the history: what was not used for ``FORGET_TICKS`` of them is forgotten."""
        self.findings: dict[str, tuple[tuple[object, ...], object]] = {}
        """What a rule made of its last inputs (``rules.base.remembered``), by rule."""
        self.columns: dict[int, _Column] = {}
        self.children: dict[Hashable, Lineage] = {}
        self.ordered = True

    def child(self, key: Hashable) -> Lineage:
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = Lineage()
        child.ordered = self.ordered
        child.tick = self.tick
        return child

    def next_tick(self) -> None:
        """A new window of the history; every ``FORGET_TICKS``, forget the columns and derived windows not used in
        that many (a reader closing over values that change, the workers of one epoch, would keep its samples)."""
        self.tick += 1
        if self.tick % FORGET_TICKS == 0:
            self._forget(self.tick - FORGET_TICKS)

    def _forget(self, before: int) -> None:
        for key in [k for k, column in self.columns.items() if column.seen < before]:
            del self.columns[key]
        for name in [k for k, child in self.children.items() if child.tick < before]:
            del self.children[name]
        for child in self.children.values():
            child._forget(before)

    def read(self, key: int, read: Callable[[JobSample], T], samples: tuple[JobSample, ...]) -> list[T]:
        """``read`` of every sample: the last window's column, less the samples dropped, plus the samples added."""
        return cast(list[T], self._advance(key, read, samples)[0].values)

    def _advance(
        self, key: int, read: Callable[[JobSample], object], samples: tuple[JobSample, ...]
    ) -> tuple[_Column, tuple[JobSample, ...] | None, list[object], list[object]]:
        """The column of ``read`` brought to ``samples``, with the samples it stood for before (None where it was
        read anew) and the values dropped and added since."""
        column = self.columns.get(key)
        if column is None:
            column = self.columns[key] = _Column(samples, [_reading(s, key, read) for s in samples], self.tick)
            return column, None, _NOTHING, _NOTHING
        column.seen = self.tick
        before = column.samples
        if before is samples:
            return column, before, _NOTHING, _NOTHING
        n = len(before)
        if n > 1 and n == len(samples) and before[1] is samples[0] and before[-1] is samples[-2]:
            dropped, kept = 1, n - 1  # a tick's usual step: one sample out, one in
        else:
            shift = _shift(before, samples)
            if shift is None:
                column = _Column(samples, [_reading(s, key, read) for s in samples], self.tick)
                self.columns[key] = column
                return column, None, _NOTHING, _NOTHING
            dropped, kept = shift
        old = column.values
        gone = old[:dropped]
        if kept == len(samples) - 1:
            sample = samples[-1]
            readings = sample.readings
            value = readings.get(key, _UNREAD)
            if value is _UNREAD:
                value = readings[key] = read(sample)
            added = [value]
        else:
            added = [_reading(s, key, read) for s in samples[kept:]]
        values = old[dropped:]
        values.extend(added)
        column.samples = samples
        column.values = values
        return column, before, gone, added

    def median(self, key: int, read: Read, samples: tuple[JobSample, ...]) -> float | None:
        """The median of ``read`` over ``samples``, from the last window's values in order, less the values of the
        samples dropped, plus those of the samples added (where they are all plain numbers)."""
        column, before, gone, added = self._advance(key, read, samples)
        ordered = column.ordered
        if before is not None and column.ordered_of is before:
            if not _same_one(gone, added):
                for value in gone:
                    if value is not None:
                        del ordered[bisect.bisect_left(ordered, cast(float, value))]
                for value in added:
                    if value is not None:
                        if value != value:  # NaN: not ordered; the window is sorted anew while it holds one
                            column.ordered_of = None
                            return _median([cast(float, v) for v in column.values if v is not None])
                        bisect.insort_right(ordered, cast(float, value))
        else:
            known = [cast(float, v) for v in column.values if v is not None]
            if not all(v == v for v in known):
                column.ordered_of = None
                return _median(known)
            ordered = column.ordered = sorted(known)
        column.ordered_of = samples
        n = len(ordered)
        if not n:
            return None
        middle = n // 2
        return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    def total(
        self, key: int, read: Callable[[JobSample], tuple[int, ...]], samples: tuple[JobSample, ...]
    ) -> list[int]:
        """The sums, place by place, of ``read``'s tuples of whole numbers over ``samples``: the last window's, less
        the samples dropped, plus the samples added (whole numbers: the sums stay exact)."""
        column, before, gone, added = self._advance(key, read, samples)
        if before is not None and column.sums_of is before:
            sums = column.sums
            for value in cast(list[tuple[int, ...]], gone):
                for place, n in enumerate(value):
                    sums[place] -= n
            for value in cast(list[tuple[int, ...]], added):
                for place, n in enumerate(value):
                    sums[place] += n
        else:
            values = cast(list[tuple[int, ...]], column.values)
            sums = column.sums = [sum(place) for place in zip(*values)] if values else []
        column.sums_of = samples
        return sums

    def share(self, key: int, test: Callable[[JobSample], bool | None], samples: tuple[JobSample, ...]) -> float | None:
        """The share of ``samples`` for which ``test`` is true among those where it is known: the last window's
        counts, less the samples dropped, plus the samples added (where ``test`` gives booleans)."""
        column, before, gone, added = self._advance(key, test, samples)
        if before is not None and column.tally_of is before:
            known, true = column.known, column.true
            for value in gone:
                if value is not None:
                    known -= 1
                    true -= value is True
            for value in added:
                if value is not None:
                    if type(value) is not bool:
                        column.tally_of = None
                        return _share(column.values)
                    known += 1
                    true += value
        else:
            if any(v is not None and type(v) is not bool for v in column.values):
                column.tally_of = None
                return _share(column.values)
            known = sum(v is not None for v in column.values)
            true = sum(v is True for v in column.values)
        column.known, column.true, column.tally_of = known, true, samples
        return true / known if known else None


def _same_one(gone: list[object], added: list[object]) -> bool:
    """Whether one value went and the same one came (the same type, and not a zero, whose sign could differ): the
    values in order then stand as they are."""
    if len(gone) != 1 or len(added) != 1:
        return False
    a, b = gone[0], added[0]
    return a is b or (type(a) is type(b) and a == b and a != 0)


def _share(column: Sequence[object]) -> float | None:
    known = [t for t in column if t is not None]
    return sum(known) / len(known) if known else None  # type: ignore[arg-type]


def _shift(before: tuple[JobSample, ...], after: tuple[JobSample, ...]) -> tuple[int, int] | None:
    """How ``after`` continues ``before`` (both runs of one history): ``(dropped, kept)``, the samples dropped from
    the start of ``before`` and those of it kept at the start of ``after``; None when it does not."""
    if not before or not after:
        return None
    first = after[0]
    dropped = 0
    for sample in before:
        if sample is first:
            break
        dropped += 1
    else:
        return None
    kept = len(before) - dropped
    if kept > len(after) or before[-1] is not after[kept - 1]:
        return None
    return dropped, kept


def _reading(sample: JobSample, key: int, read: Callable[[JobSample], T]) -> T:
    readings = sample.readings
    value = readings.get(key, _UNREAD)
    if value is _UNREAD:
        value = readings[key] = read(sample)
    return cast(T, value)


def _time(sample: JobSample) -> float:
    return sample.time


@dataclass(frozen=True, slots=True)
class JobWindow:
    """Samples of one training process, oldest first.

    Samples are immutable and readers pure, so what a reader gave for a sample is kept on the sample, and a
    window's statistics on the window: the rules of one tick share them, and the next tick's window reads only
    its new sample. A window of the advisor's history has a ``lineage``: its statistics are then updated from the
    last tick's window's by the samples that changed.
    """

    samples: tuple[JobSample, ...]
    lineage: Lineage | None = field(default=None, repr=False, compare=False)
    _memo: dict[Hashable, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def latest(self) -> JobSample:
        return self.samples[-1]

    @property
    def span_s(self) -> float:
        return self.samples[-1].time - self.samples[0].time if self.samples else 0.0

    def last(self, seconds: float) -> JobWindow:
        """The samples of the last ``seconds``."""
        if not self.samples:
            return self
        key = ("last", seconds)
        found = self._memo.get(key)
        if found is None:
            samples = self.samples
            since = samples[-1].time - seconds
            lineage = self.lineage
            if lineage is not None and lineage.ordered:
                recent = samples[bisect.bisect_left(samples, since, key=_time) :]
            else:
                recent = tuple(s for s in samples if s.time >= since)
            found = self._memo[key] = JobWindow(recent, None if lineage is None else lineage.child(key))
        return cast(JobWindow, found)

    def where(self, test: Callable[[JobSample], bool]) -> JobWindow:
        """The samples for which ``test`` is true."""
        key = reader_key(test)
        if key is None or self.lineage is None:
            return JobWindow(tuple(s for s in self.samples if test(s)))
        memo_key = ("where", key)
        found = self._memo.get(memo_key)
        if found is None:
            kept = self._read(test)
            samples = tuple(itertools.compress(self.samples, kept))
            found = self._memo[memo_key] = JobWindow(samples, self.lineage.child(memo_key))
        return cast(JobWindow, found)

    def covers(self, seconds: float) -> bool:
        """Whether there are enough samples, spread over most of ``seconds``, to judge a window."""
        return len(self.samples) >= MIN_SAMPLES and self.span_s >= 0.6 * seconds

    def _read(self, read: Callable[[JobSample], T]) -> list[T]:
        """``read`` of every sample, from each sample's readings where it read it before. Not to be changed: the
        list may be kept for the next tick's window."""
        key = reader_key(read)
        if key is None:
            return [read(s) for s in self.samples]
        if self.lineage is not None:
            return self.lineage.read(key, read, self.samples)
        return [_reading(sample, key, read) for sample in self.samples]

    def column(self, read: Callable[[JobSample], T]) -> list[T]:
        """``read`` of every sample, in order (not to be changed: the next tick's window may start from it)."""
        return self._read(read)

    def rise(self, read: Read) -> float | None:
        """The last known value of ``read`` less the first (None where none is known): what ``steady_rise`` of the
        ``points`` would call the rise, found without them."""
        values = self._read(read)
        first = next((v for v in values if v is not None), None)
        if first is None:
            return None
        last = next(v for v in reversed(values) if v is not None)
        return last - first

    def values(self, read: Read) -> list[float]:
        return [v for v in self._read(read) if v is not None]

    def points(self, read: Read) -> list[tuple[float, float]]:
        """``(time, value)`` of every sample where the value is known."""
        return [(s.time, v) for s, v in zip(self.samples, self._read(read)) if v is not None]

    def median(self, read: Read) -> float | None:
        key = reader_key(read)
        if key is None:
            return _median(self.values(read))
        memo_key = ("median", key)
        memo = self._memo
        if memo_key in memo:
            return cast("float | None", memo[memo_key])
        lineage = self.lineage
        found = memo[memo_key] = (
            _median(self.values(read)) if lineage is None else lineage.median(key, read, self.samples)
        )
        return found

    def share(self, test: Callable[[JobSample], bool | None]) -> float | None:
        """The share of samples for which ``test`` is true, among those where it is known."""

        key = reader_key(test)
        if key is None:
            return _share([test(s) for s in self.samples])
        lineage = self.lineage
        if lineage is None:
            return self.cached(("share", key), lambda: _share(self._read(test)))
        return self.cached(("share", key), lambda: lineage.share(key, test, self.samples))

    def loader_median(self, name: str) -> float | None:
        """The median of a number the probe reports for the active DataLoader (``data_wait_share``, ...)."""
        return self.median(_LOADER_READERS.get(name) or _loader_reader(name))

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked of this window, what it gave after that."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]  # type: ignore[return-value]


_LOADER_READERS: dict[str, Read] = {}


def _loader_reader(name: str) -> Read:
    """The reader of one of the active DataLoader's numbers, made once per name."""

    def read(s: JobSample) -> float | None:
        return getattr(s.loader, name) if s.loader is not None else None

    _LOADER_READERS[name] = fixed_reader(read)
    return read


@dataclass(frozen=True, slots=True)
class WorkerActivity:
    """What a window says the DataLoader workers do.

    ``busy_share`` is the share of (sample, worker) readings in which a worker was on a CPU or waiting for one
    (state R, or 50 % of a core or more): a CPU-bound worker stays runnable even when other processes leave it
    little CPU, where its CPU % alone would make it look idle. ``disk_share`` is the share in disk sleep (D).
    """

    count: int
    busy_share: float
    disk_share: float
    cpu_cores: float | None
    uss_bytes_per_worker: float | None


def worker_activity(window: JobWindow) -> WorkerActivity | None:
    """The workers' activity over a window; None when no sample saw a worker."""
    return window.cached("worker_activity", lambda: _worker_activity(window))


def _worker_states(sample: JobSample) -> tuple[int, int, int]:
    """``(readings, busy, in disk sleep)`` among a sample's workers."""
    busy = disk = readings = 0
    for worker in sample.view.workers:
        host = worker.host
        if host.status is None:
            continue
        readings += 1
        busy += int(host.status == "running" or (host.cpu_percent or 0.0) >= 50.0)
        disk += int(host.status == "disk-sleep")
    return readings, busy, disk


def _worker_activity(window: JobWindow) -> WorkerActivity | None:
    lineage = window.lineage
    key = reader_key(_worker_states)
    if lineage is not None and key is not None:
        readings, busy, disk = lineage.total(key, _worker_states, window.samples) or (0, 0, 0)
    else:
        states = window._read(_worker_states)
        readings = sum(r for r, _, _ in states)
        busy = sum(b for _, b, _ in states)
        disk = sum(d for _, _, d in states)
    if not readings:
        return None
    cpu = window.median(lambda s: s.view.workers_cpu_percent)
    uss = window.median(
        lambda s: _mean([w.uss_bytes for w in s.view.workers if w.uss_bytes is not None]) if s.view.workers else None
    )
    return WorkerActivity(
        count=len(window.latest.view.workers),
        busy_share=busy / readings,
        disk_share=disk / readings,
        cpu_cores=None if cpu is None else cpu / 100,
        uss_bytes_per_worker=uss,
    )


@dataclass(frozen=True, slots=True)
class PassStarts:
    """The passes (epochs) a window saw start, from the probe.

    ``lost_share`` is the share of the window spent from a pass's start (its iterator created, its workers
    started) to its first batch, beyond what a pass whose workers were already running would spend: such a pass
    waits for its first batch about as long as the loop waits for any other batch (``batch_wait_s``).
    """

    passes: int
    pass_start_s: float
    batch_wait_s: float
    lost_share: float


def pass_starts(window: JobWindow) -> PassStarts | None:
    """The window's pass starts, or None without the probe's timing or a pass started within it."""
    latest = window.latest.loader
    if latest is None or latest.pass_start_s is None:
        return None
    # From the first sample of this loader: before it, the job may not have built it yet.
    since, first = next(
        (s.time, s.loader) for s in window.samples if s.loader and s.loader.loader_id == latest.loader_id
    )
    passes = latest.passes - first.passes
    span = window.latest.time - since
    if passes < 1 or span <= 0:
        return None
    starting = min(span, passes * latest.pass_start_s)
    waited = (window.loader_median("data_wait_share") or 0.0) * span
    batch_wait = max(0.0, waited - starting) / max(1, latest.batches - first.batches - passes)
    lost = passes * max(0.0, latest.pass_start_s - batch_wait)
    return PassStarts(passes, latest.pass_start_s, batch_wait, min(1.0, lost / span))


def main_thread_busy(window: JobWindow) -> float | None:
    """The share of the time the main thread was on a CPU or waiting for one.

    Its measured CPU share, or, where other processes keep it off the CPUs, the share of samples it was runnable
    (state R), whichever is larger: CPU time alone would make a thread starved of CPU look idle.
    """
    busy = window.median(lambda s: s.view.main_thread.busy_share)
    runnable = window.share(
        lambda s: None if s.view.main_thread.status is None else s.view.main_thread.status == "running"
    )
    known = [v for v in (busy, runnable) if v is not None]
    return max(known) if known else None


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares slope (per second) and r² of ``(time, value)`` points; None for fewer than three or no spread.

    A flat series has an r² of 0: it rises not at all, so never steadily.
    """
    if len(points) < MIN_SAMPLES:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in points)
    var_v = sum((v - mean_v) ** 2 for _, v in points)
    if var_t <= 0:
        return None
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    slope = cov / var_t
    r2 = 0.0 if var_v <= 0 else cov * cov / (var_t * var_v)
    return slope, r2


@dataclass(frozen=True, slots=True)
class Rise:
    """A series that rises: by ``rise`` over the window, ``slope`` per second, with the fit's ``r2``."""

    rise: float
    slope: float
    r2: float


def steady_rise(points: Sequence[tuple[float, float]], least: float = 0.0) -> Rise | None:
    """How a series rises when it rises steadily: a good linear fit (``STEADY_R2``), and each half of the window
    carrying at least a quarter of the rise, which a single jump (an import, a cache filled once) does not.
    A rise below ``least`` is none (and needs no fit)."""
    if not points:
        return None
    rise = points[-1][1] - points[0][1]
    if rise <= 0 or rise < least:
        return None
    fit = linear_fit(points)
    if fit is None:
        return None
    slope, r2 = fit
    if slope <= 0 or r2 < STEADY_R2:
        return None
    middle = (points[0][0] + points[-1][0]) / 2
    first = [v for t, v in points if t <= middle]
    second = [v for t, v in points if t >= middle]
    if min(first[-1] - first[0], second[-1] - second[0]) < rise / 4:
        return None
    return Rise(rise, slope, r2)


def counter_increase(values: Sequence[float]) -> float:
    """How much a counter grew across a series, ignoring drops (a restarted process starts again from zero)."""
    return sum(max(0.0, b - a) for a, b in itertools.pairwise(values))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
