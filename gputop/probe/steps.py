"""Finding a training step and timing its phases, in the training thread.

A step is what the loop does between two requests for a batch (``__next__`` of a DataLoader iterator). With
gradient accumulation the batches up to an optimizer step make one step: a request closes the step only once an
optimizer has stepped in it, or once the loop has asked for more than twice as many batches as it did between its
last two optimizer steps without stepping one (a validation loop after training: from then on each batch is a
step). Before any optimizer step, and in a loop that steps none, every batch is a step. A job that never iterates
a DataLoader has its steps cut at the end of an optimizer step instead: the first optimizer that steps leads, so
that a loop stepping two optimizers (a GAN's) makes one step per turn of the loop, not two.

Every step's length is timed on the host clock. Its phases are timed on sampled steps only: one in
``SAMPLE_EVERY`` on average (the gap varies, so that a loop's cycle is not sampled at one point of it), or the
next one once ``SAMPLE_GAP_S`` has gone by. Torch's global module forward hooks, the
one piece whose cost grows with the model (they are called for every module), are installed for a sampled step
and removed after it; a job that uses ``torch.compile`` keeps them installed, so that compiled code never sees the
hooks come and go (they do nothing while dynamo traces them). On CUDA a sampled step also records an event from a
pool at each change of phase (``phases.resolve`` reads them on the writer thread). Nothing here raises into the
job: the hooks that call in are guarded by their callers and count their failures.
"""

from __future__ import annotations

import random
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .phases import BACKWARD, COLLECTIVE, DATA, FORWARD, H2D, OPTIMIZER, OTHER, PHASE_NAMES, Mark

SAMPLE_EVERY = 16
SAMPLE_GAP_S = 0.25
_GAPS = random.Random()
"""The probe's own generator: drawing from ``random``'s shared one would change the job's random numbers."""
"""A step is sampled when ``SAMPLE_EVERY`` steps or ``SAMPLE_GAP_S`` seconds have passed since the last sampled
one: slow steps are all sampled, fast ones one in 16, whose hooks then cost a sixteenth."""
MAX_FINISHED = 2048
"""Steps kept for the writer between two reads, the latest (at 0.5 s a write, room for 4000 steps a second; the
window keeps at most 2000 anyway)."""
LEAD_MISSED_MAX = 8
"""Optimizer steps of other optimizers after which, its leader silent, another optimizer leads (no DataLoader)."""
MAX_POOL = 64

NEVER = 1 << 62
Instrument = Any
"""An object measuring one whole step (``flops.FlopCount``, ``syncs.SyncSampler``): ``due(steps)``, ``begin()``,
``end()``, and ``next_due``, the step it is next due at (``NEVER``), so that other steps ask none of them."""


def compile_in_use() -> bool:
    """Whether ``torch.compile`` has compiled anything in this process (``torch.optim`` imports dynamo too, so
    its presence alone says nothing)."""
    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    try:
        return bool(counters is not None and counters["frames"]["total"])
    except Exception:
        return False


class StepRecord:
    """One finished step, handed to the writer thread."""

    __slots__ = ("batches", "end", "h2d", "marks", "measured", "samples", "seconds", "step_s")

    def __init__(
        self,
        end: float,
        step_s: float,
        batches: int,
        samples: int | None,
        seconds: list[float] | None,
        marks: list[Mark] | None,
        h2d: tuple[int, int, int] | None,
        measured: bool = False,
    ) -> None:
        self.end = end
        self.step_s = step_s
        self.batches = batches
        self.samples = samples
        self.seconds = seconds
        """Host seconds per phase of a sampled step; None for a step that was not sampled."""
        self.marks = marks
        """CUDA events of a sampled step on CUDA; None elsewhere."""
        self.h2d = h2d
        """``(bytes, of which pageable, of which blocking)`` copied to the GPU in a sampled step."""
        self.measured = measured
        """Measured by an instrument (FLOPs, syncs), which slowed it down: left out of the statistics."""


class EventPool:
    """CUDA timing events, recorded in the training thread and given back by the writer once read: creating an
    event costs more than recording one. ``make`` builds a new one (``torch.cuda.Event(enable_timing=True)``)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.free: deque[Any] = deque(maxlen=MAX_POOL)

    def record(self) -> Any:
        try:
            event = self.free.pop()
        except IndexError:
            event = self.make()
        event.record()
        return event

    def give_back(self, marks: list[Mark]) -> None:
        self.free.extend(event for _, event in marks)


class StepTracker:
    """The current step of the training thread: its start, its phase now, and (sampled) seconds per phase."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.forward_hooks: Callable[[bool], None] | None = None
        """Installs (True) or removes (False) the global forward hooks; set by ``phase_hooks``."""
        self.keep_forward_hooks = False
        self.hooks_on = False
        self.events: EventPool | None = None
        self.instruments: list[Instrument] = []
        self.instruments_due = 0
        self.forget()

    def forget(self) -> None:
        """Start over (a forked child): the hooks already installed stay, and call into this same tracker."""
        self.boundary: str | None = None
        """``DataLoader`` or ``optimizer step`` once a step has been found; None before."""
        self.steps = 0
        self.step_start: float | None = None
        self.batches = 0
        self.samples: int | None = 0
        self.optimizer_stepped = False
        self.batches_since_optimizer = 0
        self.accumulation = 0
        self.lead_optimizer: int | None = None
        self.lead_missed = 0
        self.finished: deque[StepRecord] = deque(maxlen=MAX_FINISHED)
        self.active_instruments: list[Instrument] = []
        # Phases of a sampled step
        self.sampled = False
        self.last_sampled_step = -SAMPLE_EVERY
        self.sample_gap = SAMPLE_EVERY
        self.last_sampled_at = float("-inf")
        self.seconds = [0.0] * len(PHASE_NAMES)
        self.current = OTHER
        self.since = 0.0
        self.stack: list[int] = []
        self.forward_depth = 0
        self.h2d = [0, 0, 0]
        self.marks: list[Mark] | None = None

    # -- boundaries ----------------------------------------------------------------------------------------------

    def batch_requested(self, now: float, batch_size: int | None) -> None:
        """The loop asks a DataLoader for its next batch: maybe the end of a step; the data phase begins."""
        if self.boundary != "DataLoader":
            self.boundary = "DataLoader"
            self.step_start = None  # steps cut at optimizer steps until now: start afresh
        if self.step_start is None:
            self._start(now)
        elif self.optimizer_stepped or self.batches_since_optimizer > 2 * self.accumulation:
            self._close(now)
        self.batches += 1
        self.batches_since_optimizer += 1
        if self.samples is not None:
            self.samples = None if batch_size is None else self.samples + batch_size
        if self.sampled:
            self._switch(DATA, now)

    def batch_arrived(self, now: float) -> None:
        if self.sampled and self.current == DATA:
            self._switch(OTHER, now)

    def optimizer_started(self) -> None:
        if self.sampled:
            self.enter(OPTIMIZER)

    def optimizer_finished(self, optimizer: Any) -> None:
        """After ``optimizer.step()``: the phase ends; without a DataLoader, the lead optimizer's step ends a step."""
        if self.sampled and self.current == OPTIMIZER:
            self.leave()
        self.optimizer_stepped = True
        if self.batches_since_optimizer:
            self.accumulation = self.batches_since_optimizer
            self.batches_since_optimizer = 0
        if self.boundary == "DataLoader":
            return
        key = id(optimizer)
        if self.lead_optimizer is None or self.lead_missed >= LEAD_MISSED_MAX:
            self.lead_optimizer = key
        if key != self.lead_optimizer:
            self.lead_missed += 1
            return
        self.lead_missed = 0
        now = self.clock()
        if self.boundary is None:
            self.boundary = "optimizer step"
            self._start(now)
        else:
            self._close(now)

    def _start(self, now: float) -> None:
        self.step_start = now
        self.batches = 0
        self.samples = 0
        self.optimizer_stepped = False
        self.forward_depth = 0
        if self.stack:
            self.stack.clear()
        self.current = OTHER
        self.since = now
        due = self.steps - self.last_sampled_step >= self.sample_gap
        sampled = due or now - self.last_sampled_at >= SAMPLE_GAP_S
        if sampled:
            # The gap to the next sampled step varies around SAMPLE_EVERY: a fixed one would sample the same step
            # of every cycle a loop repeats (with 2 or 4 workers, the step whose batch comes last every time).
            self.sample_gap = max(1, SAMPLE_EVERY // 2 + _GAPS.randrange(SAMPLE_EVERY))
            self.last_sampled_step = self.steps
            self.last_sampled_at = now
            self.seconds = [0.0] * len(PHASE_NAMES)
            self.h2d = [0, 0, 0]
            self.marks = [(OTHER, self.events.record())] if self.events is not None else None
        else:
            self.marks = None
        want_hooks = sampled or self.keep_forward_hooks
        if want_hooks != self.hooks_on and self.forward_hooks is not None:
            if not want_hooks and compile_in_use():
                self.keep_forward_hooks = True  # compiled code must not see the hooks come and go
            else:
                self.forward_hooks(want_hooks)
                self.hooks_on = want_hooks
        self.sampled = sampled
        if self.steps >= self.instruments_due:
            for instrument in self.instruments:
                if instrument.due(self.steps):
                    instrument.begin()
                    self.active_instruments.append(instrument)
            self.instruments_due = min((i.next_due for i in self.instruments), default=NEVER)

    def _close(self, now: float) -> None:
        step_start = self.step_start if self.step_start is not None else now
        measured = bool(self.active_instruments)
        if measured:
            for instrument in self.active_instruments:
                instrument.end()
            self.active_instruments.clear()
        seconds = marks = h2d = None
        if self.sampled and not measured:
            self.seconds[self.current] += now - self.since
            seconds = self.seconds
            h2d = (self.h2d[0], self.h2d[1], self.h2d[2])
            if self.marks is not None and self.events is not None:
                self.marks.append((OTHER, self.events.record()))
                marks = self.marks
        if measured:  # slowed down by what measured it: kept out of the statistics, only counted
            self.finished.append(StepRecord(now, now - step_start, self.batches, self.samples, None, None, None, True))
        else:
            self.finished.append(StepRecord(now, now - step_start, self.batches, self.samples, seconds, marks, h2d))
        self.steps += 1
        self._start(now)

    # -- phases (sampled steps only) ----------------------------------------------------------------------------

    def _switch(self, phase: int, now: float) -> None:
        self.seconds[self.current] += now - self.since
        self.since = now
        self.current = phase
        if self.marks is not None and self.events is not None:
            self.marks.append((phase, self.events.record()))

    def enter(self, phase: int) -> None:
        """A phase begins inside the current one (a collective inside the forward pass): the current one resumes
        at ``leave``, so the inner phase's time is taken from the outer one."""
        self.stack.append(self.current)
        self._switch(phase, self.clock())

    def leave(self) -> None:
        self._switch(self.stack.pop() if self.stack else OTHER, self.clock())

    def forward_pre(self, module: Any, args: Any) -> None:
        """Global forward pre hook: the outermost module call of a sampled step begins the forward phase; a
        forward run during the backward pass (activation checkpointing) stays backward."""
        self.forward_depth += 1
        if self.forward_depth == 1 and self.sampled and self.current != BACKWARD:
            self.enter(FORWARD)

    def forward_post(self, module: Any, args: Any, output: Any) -> None:
        self.forward_depth = max(0, self.forward_depth - 1)
        if self.forward_depth == 0 and self.sampled and self.current == FORWARD:
            self.leave()

    def gradients_ready(self) -> None:
        """DDP's model has its gradients: what remains of the backward pass is waiting for their all-reduce."""
        if self.sampled and self.current == BACKWARD:
            self._switch(COLLECTIVE, self.clock())

    def copied_to_device(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        self.h2d[0] += nbytes
        if not pinned:
            self.h2d[1] += nbytes
        if not non_blocking:
            self.h2d[2] += nbytes


__all__ = ["BACKWARD", "COLLECTIVE", "DATA", "FORWARD", "H2D", "OPTIMIZER", "OTHER", "StepRecord", "StepTracker"]
