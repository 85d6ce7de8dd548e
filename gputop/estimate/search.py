"""The largest batch size that fits: an exponential search for a batch that does not fit, then bisection between
the last one that did and it. Pure: the cost of a batch is a function the caller gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MAX_BATCH = 1 << 20
"""Where the search stops doubling: a batch this large that still fits is reported as it is."""


@dataclass(frozen=True)
class Search:
    """The answer: ``largest`` fits (0 when not even a batch of one does), ``tried`` batch sizes were estimated."""

    largest: int
    tried: int


def largest_fitting(fits: Callable[[int], bool], most: int = MAX_BATCH) -> Search:
    """The largest batch size ``b`` with ``fits(b)``, assuming memory grows with the batch, up to ``most``.
    Doubles until a batch does not fit, then bisects, so it costs about 2·log2(answer) estimates."""
    tried = 0

    def check(batch: int) -> bool:
        nonlocal tried
        tried += 1
        return fits(batch)

    if not check(1):
        return Search(0, tried)
    good, bad = 1, None
    batch = 2
    while batch <= most:
        if not check(batch):
            bad = batch
            break
        good = batch
        batch *= 2
    if bad is None:
        return Search(good, tried)
    while bad - good > 1:
        middle = (good + bad) // 2
        if check(middle):
            good = middle
        else:
            bad = middle
    return Search(good, tried)
