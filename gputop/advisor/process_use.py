"""What a watch saw of the process it was asked about, beside the advisor's findings: whether it showed training
evidence, and what it used of the GPUs and the host.

The training rules judge only processes with training evidence (``TrainingView.evidence``). ``gputop report --pid``
on any other process says so, which evidence is missing, and what gputop can still tell of it, instead of a bare
"no findings" that reads like a clean bill of health.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

from gputop.formatting import fmt_bytes
from gputop.frozen import immutable
from gputop.model import Evidence, Snapshot, job_views
from gputop.sanitize import printable

EVIDENCE_MISSING: dict[Evidence, str] = {
    "probe report": "no report from gputop's probe",
    "DataLoader workers": "no DataLoader workers",
    "launcher rank": "no launcher rank (torchrun's RANK)",
    "torch threads": "no threads torch names (pt_main_thread, pt_autograd_N)",
}
"""Each kind of training evidence as the text that says it was not seen."""

COMMAND_SHOWN = 160
"""Characters of the command line shown in the text (the JSON holds it whole)."""


@dataclass(slots=True)
class _Series:
    """A running mean and maximum of a reading over a watch, without keeping the readings."""

    total: float = 0.0
    count: int = 0
    most: float | None = None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.total += value
        self.count += 1
        self.most = value if self.most is None else max(self.most, value)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@immutable
class GpuUse:
    """One GPU the process held memory on: the most it held, how busy the GPU was (every process on it counted),
    and the process's own share of the SMs where NVML samples it."""

    index: int
    name: str | None
    memory_bytes: int | None
    busy_mean: float | None
    busy_max: float | None
    sm_mean: float | None


@immutable
class ProcessUse:
    """What a watch of ``pid`` saw of it over ``snapshots`` snapshots.

    ``evidence`` is the training evidence seen in any of them, of the process or of the training processes below
    it (a torchrun agent's ranks); empty for a process the training rules never judged."""

    pid: int
    snapshots: int
    evidence: tuple[Evidence, ...]
    seen: int = 0
    """The snapshots the process is in (as a host process, a GPU process or a training view)."""
    name: str | None = None
    command: str | None = None
    cpu_mean: float | None = None
    cpu_max: float | None = None
    rss_bytes: int | None = None
    gpus: tuple[GpuUse, ...] = ()
    no_gpus: str | None = None
    """Why there are no GPU readings where NVML never answered (its reason), None where it did."""

    @property
    def trains(self) -> bool:
        return bool(self.evidence)

    @property
    def missing(self) -> tuple[Evidence, ...]:
        """The kinds of training evidence not seen, in their one order."""
        return tuple(e for e in get_args(Evidence) if e not in self.evidence)


@dataclass(slots=True)
class _GpuTally:
    name: str | None = None
    memory_bytes: int | None = None
    busy: _Series = field(default_factory=_Series)
    sm: _Series = field(default_factory=_Series)


class UseTally:
    """Adds up what each snapshot shows of one process; ``result()`` is the ``ProcessUse`` so far."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.snapshots = 0
        self.seen = 0
        self._evidence: set[Evidence] = set()
        self._name: str | None = None
        self._command: str | None = None
        self._cpu = _Series()
        self._rss: int | None = None
        self._gpus: dict[int, _GpuTally] = {}
        self._no_gpus: str | None = "no snapshot"

    def add(self, snap: Snapshot) -> None:
        pid = self.pid
        self.snapshots += 1
        views = job_views(snap.training, pid)
        for view in views:
            self._evidence.update(view.evidence)
        host = snap.host_process(pid)
        rows = [row for row in snap.processes if row.pid == pid]
        self.seen += bool(views or host or rows)
        if host is not None:
            self._name = host.name or self._name
            self._command = host.command or self._command
            self._cpu.add(host.cpu_percent)
            self._rss = host.rss_bytes if host.rss_bytes is not None else self._rss
        if snap.driver.ok:
            self._no_gpus = None
        elif self._no_gpus is not None:
            self._no_gpus = snap.driver.reason or "NVML is not available"
        gpus = {g.index: g for g in snap.gpus}
        for row in rows:
            tally = self._gpus.setdefault(row.gpu_index, _GpuTally())
            if row.gpu_memory_bytes is not None:
                tally.memory_bytes = max(tally.memory_bytes or 0, row.gpu_memory_bytes)
            tally.sm.add(row.sm_percent)
            gpu = gpus.get(row.gpu_index)
            if gpu is not None:
                tally.name = gpu.name or tally.name
                tally.busy.add(gpu.utilization_gpu_percent)

    def result(self) -> ProcessUse:
        order = [e for e in get_args(Evidence) if e in self._evidence]
        return ProcessUse(
            pid=self.pid,
            snapshots=self.snapshots,
            evidence=tuple(order),
            seen=self.seen,
            name=self._name,
            command=self._command,
            cpu_mean=self._cpu.mean,
            cpu_max=self._cpu.most,
            rss_bytes=self._rss,
            gpus=tuple(
                GpuUse(index, t.name, t.memory_bytes, t.busy.mean, t.busy.most, t.sm.mean)
                for index, t in sorted(self._gpus.items())
            ),
            no_gpus=self._no_gpus,
        )


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}%"


def _gpu_line(gpu: GpuUse) -> str:
    name = f" ({printable(gpu.name)})" if gpu.name else ""
    held = "memory not reported" if gpu.memory_bytes is None else f"{fmt_bytes(gpu.memory_bytes)} held"
    line = f"GPU {gpu.index}{name}: {held}"
    if gpu.busy_mean is not None:
        line += f"; the GPU busy {_pct(gpu.busy_mean)} on average, {_pct(gpu.busy_max)} at most (every process)"
    if gpu.sm_mean is not None:
        line += f"; this process {_pct(gpu.sm_mean)} of its SMs"
    return line


def render_not_training(use: ProcessUse) -> str:
    """The text ``gputop report --pid`` prints before the findings for a process without training evidence."""
    if not use.seen:
        return f"PID {use.pid} is in none of the {use.snapshots} snapshots: there is nothing to judge.\n"
    lines = [
        f"Not a training process: PID {use.pid} showed no training evidence in {use.snapshots} snapshots, so only "
        "the GPU rules judged it.",
        f"  missing: {', '.join(EVIDENCE_MISSING[e] for e in use.missing)}",
    ]
    who = printable(use.name) if use.name else "name unknown"
    if use.command:
        command = printable(use.command)
        who += ": " + (command if len(command) <= COMMAND_SHOWN else command[: COMMAND_SHOWN - 1] + "…")
    lines.append(f"  {who}")
    if use.gpus:
        lines.extend(f"  {_gpu_line(gpu)}" for gpu in use.gpus)
    elif use.no_gpus is not None:
        lines.append(f"  GPUs unknown: {printable(use.no_gpus)}")
    else:
        lines.append("  no GPU: NVML listed it on none")
    cpu = "CPU unknown" if use.cpu_mean is None else f"CPU {use.cpu_mean:.0f}% of a core on average"
    if use.cpu_max is not None:
        cpu += f", {use.cpu_max:.0f}% at most"
    lines.append(f"  {cpu}; memory (RSS) {fmt_bytes(use.rss_bytes)}")
    lines.append(
        "  A training job shows its input pipeline and memory once started with gputop run -- CMD, or with "
        "gputop.probe.install() in it."
    )
    return "\n".join(lines) + "\n"


def process_use_dict(use: ProcessUse) -> dict[str, Any]:
    """The ``process`` object of ``gputop report --pid``'s JSON document (docs/json.md)."""
    return {
        "pid": use.pid,
        "name": use.name,
        "command": use.command,
        "trains": use.trains,
        "evidence": list(use.evidence),
        "missing_evidence": list(use.missing),
        "snapshots": use.snapshots,
        "seen": use.seen,
        "cpu_percent_mean": None if use.cpu_mean is None else round(use.cpu_mean, 1),
        "cpu_percent_max": use.cpu_max,
        "rss_bytes": use.rss_bytes,
        "gpus_unknown": use.no_gpus,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "memory_bytes": g.memory_bytes,
                "busy_percent_mean": None if g.busy_mean is None else round(g.busy_mean, 1),
                "busy_percent_max": g.busy_max,
                "sm_percent_mean": None if g.sm_mean is None else round(g.sm_mean, 1),
            }
            for g in use.gpus
        ],
    }
