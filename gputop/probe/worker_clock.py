"""What each DataLoader worker spends on a batch, timed inside the worker.

A worker's ``fetch`` (the dataset's ``__getitem__`` for each index and the collation) is wrapped: in a worker
process it adds its seconds and one batch to two slots of a small shared array, the worker's own. The array is
made by the loop's process as an iterator with workers is built, before it forks them (``arm``), so each worker
finds the array of its own loader in the memory it inherited. Workers started with ``spawn`` or ``forkserver``
inherit nothing: they time nothing, and the loader's ``worker_batch_s`` stays unknown.

Each worker also counts its batches by duration, in ``BUCKETS`` buckets a quarter-octave wide (``bucket``): the
slow batches' time (a percentile) is what a deeper queue must cover, and like the mean it does not change with the
queue's depth.

The loop's side only reads the sums at each report: the time a worker spends on a batch is what it delivers,
whether or not the loop is waiting, where the times at which batches reach the loop tell it only while the loop
waits for them.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

MAX_WORKERS = 1024
"""Workers of one loader given a slot; more are not timed (no real job runs that many)."""

BUCKETS = 64
"""Batch durations counted per worker: bucket 0 under 1 ms, bucket k (1 ≤ k < 63) from 2^((k-1)/4) to 2^(k/4) ms
(19 % wide), the last one everything from about 46 s."""
SLOT = 2 + BUCKETS
"""Doubles per worker: seconds, batches, then the duration buckets."""

_armed: Any = None
"""The array the next workers forked inherit; each worker keeps the one of its own loader."""


def arm(num_workers: int) -> Any:
    """A zeroed array of ``SLOT`` slots per worker (seconds, batches, duration buckets), made the one workers
    forked from now on use."""
    global _armed
    _armed = multiprocessing.RawArray("d", SLOT * min(num_workers, MAX_WORKERS))
    return _armed


def bucket(seconds: float) -> int:
    """The duration bucket of a batch that took ``seconds``."""
    ms = seconds * 1000.0
    if not ms >= 1.0:  # NaN included
        return 0
    return min(BUCKETS - 1, int(4.0 * math.log2(ms)) + 1)


def bucket_seconds(index: int) -> float:
    """A duration that stands for bucket ``index``: the geometric middle of its bounds (0.5 ms for bucket 0)."""
    if index <= 0:
        return 0.0005
    return 2.0 ** ((index - 0.5) / 4.0) / 1000.0


def totals(array: Any) -> tuple[float, int, tuple[int, ...]]:
    """The seconds all the array's workers spent on batches, the batches, and their counts per duration bucket."""
    values = list(array)
    workers = len(values) // SLOT
    seconds = sum(values[i * SLOT] for i in range(workers))
    batches = int(sum(values[i * SLOT + 1] for i in range(workers)))
    counts = tuple(int(sum(values[i * SLOT + 2 + k] for i in range(workers))) for k in range(BUCKETS))
    return seconds, batches, counts


def percentile(counts: tuple[int, ...], share: float) -> float | None:
    """The duration under which ``share`` of the batches counted fall (``bucket_seconds`` of that bucket); None
    where none was counted."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = share * total
    seen = 0
    for index, n in enumerate(counts):
        seen += n
        if seen >= rank:
            return bucket_seconds(index)
    return bucket_seconds(len(counts) - 1)


def wrap_fetch(original: Callable[..., Any], worker_info: Callable[[], Any]) -> Callable[..., Any]:
    """``fetch`` timed in a worker whose loader armed an array; as it was everywhere else. The original's
    exceptions (a dataset's error, ``StopIteration`` of an iterable dataset) pass untouched."""
    clock = time.perf_counter

    @functools.wraps(original)
    def fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
        array = _armed
        if array is None:
            return original(self, *args, **kwargs)
        start = clock()
        data = original(self, *args, **kwargs)
        try:
            info = worker_info()
            slot = SLOT * info.id if info is not None else -1
            if 0 <= slot < len(array):
                spent = clock() - start
                array[slot] += spent
                array[slot + 1] += 1
                array[slot + 2 + bucket(spent)] += 1
        except Exception:
            pass
        return data

    return fetch
