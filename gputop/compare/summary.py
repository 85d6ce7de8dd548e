"""One run of a training job in a few numbers: its DataLoader's settings, its throughput, where its steps go, its
memory and cost over its steady part, and what the advisor found.

A run's summary comes from its snapshots (a recording, or the snapshots ``gputop run`` takes): ``RunTally`` is fed
them one by one and keeps, per training process, the few numbers each snapshot shows of it; the summary is their
medians over the snapshots after the advisor's first window, so that start-up (imports, the first workers, the
first steps) is left out. ``summarise_recording`` reads a recording its caller opened, once, for both the tally and
the advisor. A ``--report-json`` document's summary is ``gputop.compare.decode``'s.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gputop.advisor.report import OpenRecording, RecordingFacts, report_recording
from gputop.advisor.window import AdvisorConfig
from gputop.breakdown import device_memory
from gputop.frozen import immutable
from gputop.model import ROLE_TRAINING, Advice, LoaderConfig, Severity, Snapshot, TrainingView, job_views

SETTINGS = ("num_workers", "batch_size", "pin_memory", "prefetch_factor", "persistent_workers")
"""The DataLoader's settings a comparison shows, as the probe reports the loader the job iterates."""
MEMORY_PARTS = ("weights", "gradients", "optimizer", "peak")
"""The memory a comparison shows: the probe's weights, gradients and optimizer state (summed over devices), and
the CUDA allocator's peak allocated (None on the CPU)."""
MAX_POINTS = 4096
"""The most snapshots kept per process: past it every second one is dropped, and from then on only every second
one is kept (and so on), so a day's run costs what an hour's does and the medians still span all of it."""

Setting = int | bool | None
Kind = Literal["recording", "report", "run"]


@immutable
class FindingSeen:
    """One finding of the advisor on a run, by its rule: what a comparison says is gone, new or still there."""

    id: str
    title: str
    severity: Severity
    suggest: tuple[tuple[str, int | float | str | bool], ...] = ()


@immutable
class RunSummary:
    """One run of a job's training process, as two runs are compared. Every number is None where the run did not
    show it (no probe, no CUDA, no energy counter); ``note`` says why there is nothing at all."""

    source: str
    """The file it comes from, as given, or ``this run``."""
    kind: Kind
    command: str | None = None
    """The job's command line, its words joined by spaces; None where it is not known."""
    pid: int | None = None
    process_note: str | None = None
    """Which process was summarised, where there was a choice: ``rank 0 of 2``."""
    snapshots: int = 0
    """The snapshots the medians are over."""
    steady: bool = True
    """False where the run was shorter than the advisor's window: the medians then include its start."""
    settings: tuple[tuple[str, Setting], ...] = tuple((name, None) for name in SETTINGS)
    steps_per_s: float | None = None
    samples_per_s: float | None = None
    data_wait_share: float | None = None
    phases_s: tuple[tuple[str, float], ...] = ()
    memory: tuple[tuple[str, int | None], ...] = tuple((part, None) for part in MEMORY_PARTS)
    mfu: float | None = None
    energy_per_sample_j: float | None = None
    findings: tuple[FindingSeen, ...] = ()

    def setting(self, name: str) -> Setting:
        return dict(self.settings).get(name)

    def memory_of(self, part: str) -> int | None:
        return dict(self.memory).get(part)

    @property
    def suggested(self) -> dict[str, int | float | str | bool]:
        """The settings the advisor suggested on this run, the most urgent finding's value first."""
        found: dict[str, int | float | str | bool] = {}
        for finding in self.findings:
            for name, value in finding.suggest:
                found.setdefault(name, value)
        return found


@immutable
class Point:
    """What one snapshot shows of one training process."""

    time: float
    settings: tuple[Setting, ...]
    steps_per_s: float | None
    samples_per_s: float | None
    data_wait_share: float | None
    phases_s: tuple[tuple[str, float], ...]
    memory: tuple[int | None, ...]
    mfu: float | None
    energy_per_sample_j: float | None


def point_of(view: TrainingView, time: float) -> Point:
    """The numbers of one training view at ``time``."""
    loader = view.loader
    step = view.probe.step if view.probe.ok else None
    cost = view.cost
    steps = step.steps_per_s if step is not None and step.steps_per_s is not None else None
    samples = step.samples_per_s if step is not None and step.samples_per_s is not None else None
    if loader is not None:
        steps = loader.steps_per_s if steps is None else steps
        samples = loader.samples_per_s if samples is None else samples
    return Point(
        time=time,
        settings=_settings(loader.effective, loader.requested) if loader is not None else (None,) * len(SETTINGS),
        steps_per_s=steps,
        samples_per_s=samples,
        data_wait_share=None if loader is None else loader.data_wait_share,
        phases_s=() if step is None else tuple(step.phases_s),
        memory=_memory(view),
        mfu=None if cost is None else cost.mfu,
        energy_per_sample_j=None if cost is None else cost.energy_per_sample_j,
    )


def _settings(effective: LoaderConfig, requested: LoaderConfig) -> tuple[Setting, ...]:
    """Each setting as the loader runs it, else as the job asked for it."""
    found: list[Setting] = []
    for name in SETTINGS:
        value = getattr(effective, name)
        found.append(getattr(requested, name) if value is None else value)
    return tuple(found)


def _memory(view: TrainingView) -> tuple[int | None, ...]:
    devices = device_memory(view.probe)
    parts = [_total([getattr(device, part) for device in devices]) for part in MEMORY_PARTS[:3]]
    peaks = [d.allocated_peak_bytes for d in view.probe.cuda] if view.probe.ok else []
    return (*parts, _total(peaks))


def _total(sizes: Sequence[int | None]) -> int | None:
    """The sum of every device's figure, None where there is none or one is unknown."""
    known = [size for size in sizes if size is not None]
    return sum(known) if sizes and len(known) == len(sizes) else None


@dataclass
class _Process:
    """A training process's points, and what names it."""

    points: list[Point] = field(default_factory=list)
    seen: int = 0
    stride: int = 1
    rank: int | None = None
    world_size: int | None = None
    command: str | None = None

    def add(self, point: Point) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.points.append(point)
        if len(self.points) >= MAX_POINTS:
            del self.points[1::2]
            self.stride *= 2


class RunTally:
    """Fed a run's snapshots in order, it keeps what a summary needs of each training process."""

    def __init__(self) -> None:
        self.first: float | None = None
        self._processes: dict[int, _Process] = {}
        self._focus_command: str | None = None

    def add(self, snap: Snapshot) -> None:
        """One snapshot's training processes: those of its focused job, where it has one (a run's, a recording of
        a run), else every one."""
        if self.first is None:
            self.first = snap.time
        views = snap.training
        if snap.focus_pid is not None:
            focus = snap.host_process(snap.focus_pid)
            if self._focus_command is None and focus is not None:
                self._focus_command = focus.command
            views = job_views(views, snap.focus_pid) or views
        for view in views:
            if view.role != ROLE_TRAINING or not view.trains:
                continue
            process = self._processes.setdefault(view.pid, _Process())
            process.add(point_of(view, snap.time))
            launch = view.launch
            if launch is not None and launch.rank is not None:
                process.rank, process.world_size = launch.rank, launch.world_size
            if process.command is None:
                host = snap.host_process(view.pid)
                process.command = None if host is None else host.command

    def chosen(self) -> tuple[int, str | None] | None:
        """The training process a summary is of, and a note where there was a choice: rank 0 of a job of several
        ranks, else the one seen in the most snapshots. None where there is no training process."""
        if not self._processes:
            return None
        ranked = [pid for pid, p in self._processes.items() if p.rank == 0 and (p.world_size or 0) > 1]
        if ranked:
            pid = ranked[0]
            return pid, f"rank 0 of {self._processes[pid].world_size}"
        pid = max(self._processes, key=lambda p: self._processes[p].seen)
        others = len(self._processes) - 1
        if others:
            return pid, f"the training process seen longest, of {len(self._processes)}"
        return pid, None

    def summary(
        self, source: str, kind: Kind, window_s: float, findings: Sequence[Advice], command: str | None = None
    ) -> RunSummary | None:
        """The run's summary over its steady part; None where it has no training process. ``command`` is the
        run's, where the caller knows it better than the snapshots do."""
        chosen = self.chosen()
        if chosen is None or self.first is None:
            return None
        pid, note = chosen
        process = self._processes[pid]
        steady = [p for p in process.points if p.time >= self.first + window_s]
        points = steady or process.points
        return RunSummary(
            source=source,
            kind=kind,
            command=command or self._focus_command or process.command,
            pid=pid,
            process_note=note,
            snapshots=len(points),
            steady=bool(steady),
            settings=tuple(zip(SETTINGS, _modes(p.settings for p in points), strict=True)),
            steps_per_s=_median(p.steps_per_s for p in points),
            samples_per_s=_median(p.samples_per_s for p in points),
            data_wait_share=_median(p.data_wait_share for p in points),
            phases_s=_phases(points),
            memory=tuple((part, _int_median(p.memory[i] for p in points)) for i, part in enumerate(MEMORY_PARTS)),
            mfu=_median(p.mfu for p in points),
            energy_per_sample_j=_median(p.energy_per_sample_j for p in points),
            findings=findings_seen(findings),
        )


def findings_seen(findings: Sequence[Advice]) -> tuple[FindingSeen, ...]:
    """Each rule once, in the order given (most urgent first), with its title and suggestion."""
    seen: dict[str, FindingSeen] = {}
    for advice in findings:
        if advice.id not in seen:
            suggest = tuple(advice.suggest.items())
            seen[advice.id] = FindingSeen(advice.id, advice.title, advice.severity, suggest)
    return tuple(seen.values())


def _median(values: Iterator[float | None] | list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _int_median(values: Iterator[int | None]) -> int | None:
    median = _median([None if v is None else float(v) for v in values])
    return None if median is None else round(median)


def _modes(rows: Iterator[tuple[Setting, ...]]) -> tuple[Setting, ...]:
    """Per setting, the value held in the most snapshots (None where it was never known)."""
    counters = [Counter[Setting]() for _ in SETTINGS]
    for row in rows:
        for counter, value in zip(counters, row, strict=True):
            if value is not None:
                counter[value] += 1
    return tuple(counter.most_common(1)[0][0] if counter else None for counter in counters)


def _phases(points: Sequence[Point]) -> tuple[tuple[str, float], ...]:
    """Each phase's median seconds per step over the snapshots that timed it, in the probe's order."""
    by_phase: dict[str, list[float]] = {}
    for point in points:
        for phase, seconds in point.phases_s:
            by_phase.setdefault(phase, []).append(seconds)
    return tuple((phase, statistics.median(values)) for phase, values in by_phase.items())


class _Tallied:
    """A recording whose snapshots feed a tally as the advisor reads them."""

    def __init__(self, recording: OpenRecording, tally: RunTally) -> None:
        self._recording, self._tally = recording, tally

    @property
    def info(self) -> RecordingFacts:
        return self._recording.info

    @property
    def damage(self) -> str | None:
        return self._recording.damage

    @property
    def skipped(self) -> int:
        return self._recording.skipped

    def __iter__(self) -> Iterator[Snapshot]:
        for snap in self._recording:
            self._tally.add(snap)
            yield snap


def summarise_recording(recording: OpenRecording, config: AdvisorConfig) -> RunSummary | None:
    """A recording's run, read once: the advisor over all of it as ``gputop report FILE`` runs it, and the
    summary of its training process; None where it has none."""
    tally = RunTally()
    report = report_recording(_Tallied(recording, tally), None, config)
    findings = [finding.advice for finding in report.timeline.findings]
    return tally.summary(recording.info.path, "recording", config.window_s, findings)
