"""What each DataLoader worker spends on a batch, timed inside the worker.

A worker's ``fetch`` (the dataset's ``__getitem__`` for each index and the collation) is wrapped: in a worker
process it adds its seconds and one batch to two slots of a small shared array, the worker's own. The array is
made by the loop's process as an iterator with workers is built, before it forks them (``arm``), so each worker
finds the array of its own loader in the memory it inherited. Workers started with ``spawn`` or ``forkserver``
inherit nothing: they time nothing, and the loader's ``worker_batch_s`` stays unknown.

The loop's side only reads the sums at each report: the time a worker spends on a batch is what it delivers,
whether or not the loop is waiting, where the times at which batches reach the loop tell it only while the loop
waits for them.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

MAX_WORKERS = 1024
"""Workers of one loader given a slot; more are not timed (no real job runs that many)."""

_armed: Any = None
"""The array the next workers forked inherit; each worker keeps the one of its own loader."""


def arm(num_workers: int) -> Any:
    """A zeroed array of two slots per worker (seconds, batches), made the one workers forked from now on use."""
    global _armed
    _armed = multiprocessing.RawArray("d", 2 * min(num_workers, MAX_WORKERS))
    return _armed


def totals(array: Any) -> tuple[float, int]:
    """The seconds all the array's workers spent on batches, and the batches."""
    values = list(array)
    return sum(values[0::2]), int(sum(values[1::2]))


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
            slot = 2 * info.id if info is not None else -1
            if 0 <= slot < len(array):
                array[slot] += clock() - start
                array[slot + 1] += 1
        except Exception:
            pass
        return data

    return fetch
