"""The report's ``"step"`` object: statistics over the steps of the last ``WINDOW_S``, on the writer thread.

The training thread hands over finished steps (``steps.StepRecord``); here they are kept for the window, their
CUDA events read once complete (``phases.resolve``), and summed up: the median and 95th percentile of the steps'
lengths, the warm-up (the job's first ``WARMUP_STEPS`` steps, left out of the window), the drift against the first
steady window, the rates, and the seconds per phase. Phases are timed on sampled steps only: their shares of the
sampled steps' time, times the mean step, are the seconds per phase of a mean step, which therefore add up to it.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from .phases import PHASE_NAMES, resolve
from .steps import StepRecord, StepTracker

WINDOW_S = 10.0
WARMUP_STEPS = 5
"""The first steps of a job (compilation, autotuning, the allocator's first allocations, workers starting)."""
PENDING_MAX_S = 30.0
"""CUDA events not complete after this long (a stream stopped by a hung GPU) are given up."""
MAX_WINDOW_STEPS = 2000
"""The window holds the last 10 s or the last 2000 steps, whichever is fewer: the statistics run over the whole
window at every write, and steps of a few milliseconds would otherwise make that cost more than the steps' hooks."""


def percentile(sorted_values: list[float], share: float) -> float:
    """Nearest-rank percentile of values already sorted."""
    return sorted_values[max(0, math.ceil(share * len(sorted_values)) - 1)]


class StepWindow:
    """What the writer keeps of the steps between reports."""

    def __init__(self) -> None:
        self.steps = 0
        self.warmup: list[float] = []
        self.window: deque[StepRecord] = deque()
        self.pending: deque[StepRecord] = deque()
        self.first_steady_end: float | None = None
        self.baseline: list[float] = []
        self.baseline_median: float | None = None

    def take(self, tracker: StepTracker, now: float) -> None:
        """Move the tracker's finished steps into the window, read completed CUDA events, drop old steps."""
        while True:
            try:
                record = tracker.finished.popleft()
            except IndexError:
                break
            self.steps += 1
            if record.measured:
                continue
            if self.steps <= WARMUP_STEPS:
                self.warmup.append(record.step_s)
                continue
            self._steady(record)
            if record.marks is not None:
                record.seconds = None  # the host's view of GPU work: replaced by the events' once read
                self.pending.append(record)
            self.window.append(record)
        self._read_events(tracker, now)
        # Kept: the steps of the ``WINDOW_S`` before the last one ended, which a final report looks back on
        # however long the job went on after its loop; a live report takes those of the last WINDOW_S from now.
        window = self.window
        while window and (window[0].end < window[-1].end - WINDOW_S or len(window) > MAX_WINDOW_STEPS):
            window.popleft()

    def _steady(self, record: StepRecord) -> None:
        if self.baseline_median is not None:
            return
        if self.first_steady_end is None:
            self.first_steady_end = record.end
        if record.end - self.first_steady_end <= WINDOW_S or not self.baseline:
            self.baseline.append(record.step_s)
        else:
            self.baseline_median = statistics.median(self.baseline)
            self.baseline = []

    def _read_events(self, tracker: StepTracker, now: float) -> None:
        for _ in range(len(self.pending)):
            record = self.pending.popleft()
            marks = record.marks
            if marks is None:
                continue
            seconds = resolve(marks)
            if seconds is not None:
                record.seconds, record.marks = seconds, None
                if tracker.events is not None:
                    tracker.events.give_back(marks)
            elif now - record.end <= PENDING_MAX_S:
                self.pending.append(record)

    def report(
        self, tracker: StepTracker, now: float, extra: dict[str, Any], final: bool = False
    ) -> dict[str, Any] | None:
        """The ``"step"`` object; None before the first step was found. ``extra`` holds the syncs' and FLOPs'
        fields and their reasons (``unavailable``), from their own readers. A live report covers the steps that
        ended in the last ``WINDOW_S``; a ``final`` one (at exit) those of the ``WINDOW_S`` before the last step
        ended, so that what the job did after its loop leaves its steps in the report."""
        if tracker.boundary is None:
            return None
        self.take(tracker, now)
        unavailable: dict[str, str] = dict(extra.pop("unavailable", {}))
        since = (self.window[-1].end if final and self.window else now) - WINDOW_S
        window = [record for record in self.window if record.end >= since]
        lengths = sorted(record.step_s for record in window)
        part: dict[str, Any] = {
            "boundary": tracker.boundary,
            "clock": "cuda" if tracker.events is not None else "host",
            "steps": tracker.steps,
            "window_s": None,
            "window_steps": len(lengths),
            "step_s": None,
            "step_p95_s": None,
            "warmup_step_s": statistics.median(self.warmup) if len(self.warmup) == WARMUP_STEPS else None,
            "drift": None,
            "steps_per_s": None,
            "samples_per_s": None,
            "phases_s": {},
            "h2d_bytes_per_step": None,
            "h2d_pageable_share": None,
            "h2d_blocking_share": None,
        }
        if part["warmup_step_s"] is None:
            unavailable["warmup_step_s"] = f"the first {WARMUP_STEPS} steps are still running"
        if not lengths:
            unavailable["step_s"] = (
                "warming up" if self.steps <= WARMUP_STEPS else f"no step ended in the last {WINDOW_S:g} s"
            )
        else:
            self._timing(part, window, lengths, unavailable)
        part.update(extra)
        part["unavailable"] = unavailable
        return part

    def _timing(
        self, part: dict[str, Any], window: list[StepRecord], lengths: list[float], unavailable: dict[str, str]
    ) -> None:
        total_s = sum(lengths)
        mean_s = total_s / len(lengths)
        median_s = statistics.median(lengths)
        part["window_s"] = total_s
        part["step_s"] = median_s
        part["step_p95_s"] = percentile(lengths, 0.95)
        if total_s > 0:
            part["steps_per_s"] = len(lengths) / total_s
            samples = [record.samples for record in window]
            if all(count is not None for count in samples):
                part["samples_per_s"] = sum(count or 0 for count in samples) / total_s
            else:
                unavailable["samples_per_s"] = "no batch size: no DataLoader, or one with a custom batch_sampler"
        if self.baseline_median:
            part["drift"] = median_s / self.baseline_median
        else:
            unavailable["drift"] = f"the first {WINDOW_S:g} s of steady steps are still running"
        sampled = [record for record in window if record.seconds is not None]
        sums = [sum(record.seconds[i] for record in sampled if record.seconds) for i in range(len(PHASE_NAMES))]
        timed = sum(sums)
        if timed > 0:
            part["phases_s"] = {name: s / timed * mean_s for name, s in zip(PHASE_NAMES, sums) if s > 0}
        else:
            unavailable["phases_s"] = "no step of the window was sampled yet"
        copies = [record.h2d for record in sampled if record.h2d is not None]
        copied = sum(h2d[0] for h2d in copies)
        if copies and copied:
            part["h2d_bytes_per_step"] = round(copied / len(copies))
            part["h2d_pageable_share"] = sum(h2d[1] for h2d in copies) / copied
            part["h2d_blocking_share"] = sum(h2d[2] for h2d in copies) / copied
        elif part["clock"] == "host":
            reason = "no CUDA in this process: nothing is copied to a GPU"
            unavailable.update(
                dict.fromkeys(("h2d_bytes_per_step", "h2d_pageable_share", "h2d_blocking_share"), reason)
            )
        else:
            reason = "no copy to the GPU in the sampled steps"
            unavailable.update(dict.fromkeys(("h2d_pageable_share", "h2d_blocking_share"), reason))
            part["h2d_bytes_per_step"] = 0
