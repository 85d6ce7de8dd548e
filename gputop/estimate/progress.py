"""Where a running estimate is, for a progress line: each estimate of a 1-billion-parameter model takes seconds,
and the search for the largest batch a dozen of them. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputop.estimate.parts import BatchEstimate
from gputop.formatting import fmt_bytes

Phase = Literal["asked", "search", "layers", "flops"]
"""``asked``: a batch size the caller asked for; ``search``: the search for the largest batch that fits;
``layers``: the layer table's forward pass; ``flops``: the step whose FLOPs are counted."""


@dataclass(frozen=True)
class Progress:
    """What the estimate starts now.

    Attributes:
        phase: why this batch size is run.
        batch_size: the batch size it runs.
        last: the estimate finished just before (None at the start): what that batch needed.
    """

    phase: Phase
    batch_size: int
    last: BatchEstimate | None


def progress_line(progress: Progress) -> str:
    """One line of under 80 characters: what runs now, then what the batch before it needs on the GPU and whether
    that fits."""
    if progress.phase == "search":
        now = f"largest batch that fits: trying {progress.batch_size}"
    elif progress.phase == "flops":
        now = f"counting FLOPs at batch {progress.batch_size}"
    elif progress.phase == "layers":
        now = f"the layer table at batch {progress.batch_size}"
    else:
        now = f"estimating batch {progress.batch_size}"
    last = progress.last
    if last is None:
        return f"{now}…"
    verdict = "" if last.fits is None else ", fits" if last.fits else ", too large"
    return f"{now}… · batch {last.batch_size} needs {fmt_bytes(last.nvml_bytes)}{verdict}"
