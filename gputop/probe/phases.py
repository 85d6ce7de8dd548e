"""The phases of a step, and how a sampled step's CUDA events become seconds per phase.

The names are ``gputop.model.PHASES`` in the same order (the probe cannot import the model: in a job it is loaded
on its own). A step's timeline is a list of marks ``(phase, event)``: from each mark to the next, the step was in
that mark's phase; the last mark ends the step. On the host the probe adds up seconds as it goes and keeps no
marks; on CUDA it records an event at each mark of a sampled step and reads them back on the writer thread,
once every event has completed (``query()``), without ever waiting for the GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol

PHASE_NAMES = ("data", "h2d", "forward", "backward", "optimizer", "collective", "other")
DATA, H2D, FORWARD, BACKWARD, OPTIMIZER, COLLECTIVE, OTHER = range(len(PHASE_NAMES))


class TimingEvent(Protocol):
    """What the probe uses of ``torch.cuda.Event(enable_timing=True)``."""

    def query(self) -> bool: ...

    def elapsed_time(self, end_event: Any) -> float: ...


Mark = tuple[int, Any]
"""``(phase entered, event recorded there)``."""


def resolve(marks: Sequence[Mark]) -> list[float] | None:
    """Seconds per phase (``PHASE_NAMES`` order) of a timeline of events; None while one of them has not completed.

    ``elapsed_time`` is in milliseconds on the GPU's clock. A negative interval (events of two streams) counts as
    zero rather than take time from another phase."""
    if len(marks) < 2 or not all(event.query() for _, event in marks):
        return None
    seconds = [0.0] * len(PHASE_NAMES)
    for (phase, event), (_, following) in itertools.pairwise(marks):
        seconds[phase] += max(0.0, float(event.elapsed_time(following)) / 1000.0)
    return seconds
