"""What every rule returns, and the helpers they share: windows, CUDA devices, wording."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Literal

from gputop.advisor import thresholds as th
from gputop.advisor.readers import ReaderFamily
from gputop.advisor.samples import JobSample
from gputop.advisor.trends import counter_increase
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.frozen import immutable
from gputop.model import CRITICAL, INFO, WARNING, AdviceSource, CudaMemory, Gpu, Severity


@immutable
class Finding:
    """What a rule says while its condition holds; the engine turns it into an ``Advice``."""

    severity: Severity
    title: str
    detail: str
    action: str
    source: AdviceSource
    evidence: Mapping[str, object] = field(default_factory=dict)
    suggest: Mapping[str, float | int | str | bool] = field(default_factory=dict)


Check = Callable[[JobWindow, AdvisorConfig], "Finding | None"]
GpuCheck = Callable[[Gpu], "Finding | None"]


@immutable
class Rule:
    """A rule's stable id and its check; ``idle`` rules hold for ``gpu_idle_s`` instead of a window. A ``gpu``
    rule is about the GPU a process holds (idle, throttled): it applies to every GPU process, and its findings
    are given once per GPU; the other rules need training evidence (``TrainingView.evidence``), and a ``step``
    rule the probe's step anatomy."""

    id: str
    check: Check
    idle: bool = False
    gpu: bool = False
    step: bool = False
    """Needs the probe's step anatomy: not evaluated for a process until its probe has reported one, so that a
    process without it costs the rule nothing (evaluations, once begun, go on: a finding clears as any other)."""
    at_once: bool = False
    """Raised on the first sample its condition holds in, and cleared on the first it does not: for a state the
    driver judged already (a GPU's health), which a window would only delay."""
    idle_gpu: GpuCheck | None = None
    """The same condition judged on a GPU alone, for the GPUs no watched process is on (watching a whole machine):
    a GPU that failed while idle is found before a job is put on it."""

    def hold_s(self, config: AdvisorConfig) -> float:
        if self.at_once:
            return 0.0
        return config.gpu_idle_s if self.idle else config.window_s


def remembered(w: JobWindow, rule: str, inputs: tuple[object, ...], build: Callable[..., Finding]) -> Finding:
    """``build(*inputs)``: the finding of ``rule`` from the numbers it measured. Measured numbers often hold from
    one tick to the next; then the finding made of them at the last tick of this process is given again, the same
    object, instead of worded anew (and the engine keeps its advice as it is)."""
    lineage = w.lineage
    if lineage is None:
        return build(*inputs)
    kinds = tuple(map(type, inputs))
    last = lineage.findings.get(rule)
    if last is not None and last[0] == (kinds, inputs) and isinstance(last[1], Finding):
        return last[1]
    found = build(*inputs)
    lineage.findings[rule] = ((kinds, inputs), found)
    return found


def last_found(w: JobWindow, rule: str) -> Finding | None:
    """The finding ``rule`` last made for this process (``remembered``), whether or not it holds now; None where the
    window has no history (a window made for one question) or the rule found nothing yet."""
    lineage = w.lineage
    last = None if lineage is None else lineage.findings.get(rule)
    return last[1] if last is not None and isinstance(last[1], Finding) else None


def pct(share: float | None) -> str:
    """A 0-1 share as a whole percentage, for the words of a finding."""
    return "N/A" if share is None else f"{share * 100:.0f}%"


def count(n: int, noun: str) -> str:
    """``1 worker``, ``2 workers``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def recent_window(w: JobWindow, config: AdvisorConfig) -> JobWindow | None:
    """The last window of ``w``, or None while the samples do not cover one yet (worked out once per window:
    every rule asks)."""
    return w.recent(config.window_s)


def timed_window(w: JobWindow, config: AdvisorConfig) -> JobWindow | None:
    """``recent_window``, for a process whose probe reports its step anatomy now; None otherwise (and cheaply:
    most processes have none)."""
    return None if w.latest.step is None else recent_window(w, config)


def loader_line(sample: JobSample) -> str:
    """`` at train.py:41``: where the job built the DataLoader it iterates, for the words of a change to it; empty
    where the probe does not say."""
    loader = sample.loader
    at = loader.created_at if loader is not None else None
    return f" at {at}" if at else ""


def wait_severity(wait: float) -> Severity:
    if wait >= th.DATA_WAIT_CRITICAL:
        return CRITICAL
    return WARNING if wait >= th.DATA_WAIT_WARNING else INFO


def gpu_words(busy: float | None) -> str:
    return "" if busy is None else f"; GPU busy {busy:.0f}%"


def device_gpu(sample: JobSample, device: CudaMemory) -> Gpu | None:
    return next((g for g in sample.gpus if g.index == device.gpu_index), None)


def cuda_devices(sample: JobSample) -> tuple[CudaMemory, ...]:
    """The CUDA devices the probe reports for the process (none without a trusted report)."""
    return sample.view.probe.cuda if sample.view.probe.ok else ()


DeviceFigure = Literal["allocated_bytes", "num_alloc_retries", "num_ooms", "num_device_free"]
"""The figures of a CUDA device that the rules follow across a window (``CudaMemory``'s fields)."""


def _figures(key: tuple[int, DeviceFigure], sample: JobSample) -> tuple[float, ...]:
    device, figure = key
    values = (getattr(d, figure) for d in cuda_devices(sample) if d.device == device)
    return tuple(float(v) for v in values if v is not None)


DEVICE_FIGURE = ReaderFamily("cuda device figure", _figures)
"""A sample's values of one figure of one CUDA device, by ``(device, figure)``."""


def _unallocated(device: int, sample: JobSample) -> tuple[float, ...]:
    return tuple(
        (d.reserved_bytes - d.allocated_bytes) / d.reserved_bytes
        for d in cuda_devices(sample)
        if d.device == device and d.reserved_bytes and d.allocated_bytes is not None
    )


UNALLOCATED = ReaderFamily("cuda device unallocated share", _unallocated)
"""A sample's share of one CUDA device's reserved memory that holds no tensor, by device."""


def device_series(w: JobWindow, device: int, figure: DeviceFigure) -> list[tuple[float, float]]:
    """``(time, value)`` of one CUDA device's figure across the window (the probe samples it at step starts)."""
    return [
        (sample.time, v) for sample, found in zip(w.samples, w.column(DEVICE_FIGURE((device, figure)))) for v in found
    ]


def device_values(w: JobWindow, device: int, figure: DeviceFigure) -> list[float]:
    """The values of ``device_series``, without their times."""
    return [v for found in w.column(DEVICE_FIGURE((device, figure))) for v in found]


def device_rise(w: JobWindow, device: int, figure: DeviceFigure) -> float | None:
    """The last value of one CUDA device's figure across the window less the first (None without one): the rise
    ``steady_rise`` would see in ``device_series``, found without it."""
    column = w.column(DEVICE_FIGURE((device, figure)))
    first = next((found[0] for found in column if found), None)
    if first is None:
        return None
    return next(found[-1] for found in reversed(column) if found) - first


def unallocated_shares(w: JobWindow, device: int) -> list[float]:
    """Per sample, the share of a CUDA device's reserved memory that holds no tensor (cached by the allocator)."""
    return [v for found in w.column(UNALLOCATED(device)) for v in found]


def device_increase(w: JobWindow, device: int, figure: DeviceFigure) -> float:
    """How much one of a CUDA device's counters grew across the window."""
    return counter_increase(device_values(w, device, figure))
