"""What the probe keeps per DataLoader, and the statistics it reports from that.

The training loop only adds to a loader's running totals (batches, seconds spent waiting for them, when the last
one came); everything else runs on the report writer: it samples the totals at each write, and a window's
statistics are the differences between now and the sample from ``WINDOW_S`` ago. Seconds waited *so far*,
counting a wait still in progress, is a continuous running total, so those differences are exact however the
writes fall between batches.
"""

from __future__ import annotations

import multiprocessing
import time
import weakref
from collections import deque
from typing import Any

from . import worker_clock

WINDOW_S = 10.0
CREATED_ATTR = "_gputop_probe_created_at"
"""Set on a DataLoader by the probe's wrapper of its ``__init__``: ``train.py:41``, where the job built it."""

Totals = tuple[float, int, float, float, float, int, tuple[int, ...]]
"""``(time, batches, seconds waited, of which for the first batch of a pass, seconds its workers spent on
batches, batches they were timed for, those batches per duration bucket)``: a sample of a loader's totals."""

NO_COUNTS: tuple[int, ...] = (0,) * worker_clock.BUCKETS
SLOW_SHARE = 0.95
"""The slow batches a queue must cover are the slowest 5 %: ``worker_batch_p95_s``."""
SLOW_MIN_BATCHES = 20
"""Timed batches a window needs before its 95th percentile means anything (with 20, the slowest one)."""


class LoaderTrack:
    """One DataLoader across its iterators (a new one per epoch unless ``persistent_workers``)."""

    __slots__ = (
        "__weakref__",
        "batch_size",
        "clock",
        "clock_before",
        "count",
        "created_at",
        "effective",
        "history",
        "iterator_ref",
        "last_end",
        "loader_id",
        "loader_ref",
        "pass_start_s",
        "pass_start_wait_s",
        "pass_started",
        "passes",
        "passes_ended_at",
        "requested",
        "wait_s",
        "waiting_since",
    )

    def __init__(self, loader_id: int, loader: Any, now: float | None = None) -> None:
        self.loader_id = loader_id
        self.loader_ref = weakref.ref(loader)
        self.requested = requested_config(loader)
        batch_size = self.requested.get("batch_size")
        self.batch_size = batch_size if isinstance(batch_size, int) and not isinstance(batch_size, bool) else None
        self.created_at: str | None = getattr(loader, CREATED_ATTR, None)
        self.effective: dict[str, Any] | None = None
        self.iterator_ref: weakref.ref | None = None
        self.count = 0
        self.wait_s = 0.0
        self.last_end: float | None = None
        self.waiting_since: float | None = None
        self.passes = 0
        self.pass_started: float | None = None
        self.pass_start_s: float | None = None
        self.pass_start_wait_s = 0.0
        # When the loop last asked for a batch that never came (the pass ended, or the loader failed): the end
        # of the loop's last step with this loader, where a final report's window ends (``report``).
        self.passes_ended_at: float | None = None
        # The workers' shared array of seconds and batches (``worker_clock``), and what the arrays of earlier
        # iterators (epochs without persistent workers) held.
        self.clock: Any = None
        self.clock_before: tuple[float, int, tuple[int, ...]] = (0.0, 0, NO_COUNTS)
        # Samples of the totals, oldest first; the first one is the loader's start.
        start = time.perf_counter() if now is None else now
        self.history: deque[Totals] = deque([(start, 0, 0.0, 0.0, 0.0, 0, NO_COUNTS)])

    def totals(self, now: float) -> Totals:
        """``(now, batches so far, seconds waited so far, of which for the first batch of a pass)``, the wait in
        progress included in the seconds waited."""
        waiting_since = self.waiting_since
        ongoing = now - waiting_since if waiting_since is not None else 0.0
        seconds, batches, counts = self.workers_time()
        return now, self.count, self.wait_s + max(0.0, ongoing), self.pass_start_wait_s, seconds, batches, counts

    def workers_time(self) -> tuple[float, int, tuple[int, ...]]:
        """Seconds the loader's workers spent on batches so far, the batches, and those per duration bucket."""
        seconds, batches, counts = self.clock_before
        if self.clock is not None:
            now_s, now_n, now_counts = worker_clock.totals(self.clock)
            seconds, batches = seconds + now_s, batches + now_n
            counts = tuple(a + b for a, b in zip(counts, now_counts, strict=True))
        return seconds, batches, counts

    def workers_clocked(self, array: Any) -> None:
        """A new iterator's workers time their batches in ``array``; the last iterator's count is kept."""
        self.clock_before = self.workers_time()
        self.clock = array

    def report(self, now: float, final: bool = False) -> dict[str, Any]:
        """This loader's part of the report; ``now`` is on the batch clock (``time.perf_counter``).

        A live report's window is the last ``WINDOW_S`` up to now. A ``final`` one (written at the job's exit)
        ends where the loop's last pass did, when one ended after the last batch and no wait is under way: what
        the job did after its loop (its workers' shutdown, a checkpoint saved, the interpreter's exit) is no
        part of how the loader ran, and would read as steps without a wait."""
        iterator = self.iterator_ref() if self.iterator_ref is not None else None
        loader = self.loader_ref()
        if iterator is not None and loader is not None:
            self.effective = effective_config(loader, iterator)  # kept for when the iterator is gone
        current = self.totals(now)
        ended = self.passes_ended_at
        if ended is not None and (self.waiting_since is not None or (self.last_end or 0.0) > ended):
            ended = None  # a pass under way since: the loader is live, and its window runs to now
        end = ended if final and ended is not None else now
        stats = window_stats(self._window_start(end), (end, *current[1:]))
        self._keep(current, now if ended is None else ended)
        waiting_since = self.waiting_since
        batch_size = (self.effective or self.requested).get("batch_size")
        steps_per_s = stats["steps_per_s"]
        return {
            "id": self.loader_id,
            "requested": self.requested,
            "effective": self.effective,
            "worker_pids": worker_pids(iterator),
            "passes": self.passes,
            "batches": self.count,
            **stats,
            "samples_per_s": None if steps_per_s is None or batch_size is None else steps_per_s * batch_size,
            "waiting_now_s": None if waiting_since is None else max(0.0, now - waiting_since),
            "last_batch_age_s": None if self.last_end is None else max(0.0, now - self.last_end),
            "pass_start_s": self.pass_start_s,
            "created_at": self.created_at,
        }

    def _window_start(self, end: float) -> Totals:
        """The totals at the start of the window that ends at ``end``: the newest sample from ``WINDOW_S``
        before it or earlier, else the loader's start. When the sample after it holds the same totals (``_keep``
        keeps only two of a quiet stretch), the start moves up to ``end - WINDOW_S``: nothing changed between."""
        cut = end - WINDOW_S
        history = self.history
        for i in range(len(history) - 1, -1, -1):
            if history[i][0] <= cut:
                start = history[i]
                if i + 1 < len(history) and history[i + 1][1:] == start[1:]:
                    return (cut, *start[1:])
                return start
        return history[0]

    def _keep(self, current: Totals, active_until: float) -> None:
        """Add ``current`` to the samples, dropping those no window ending at ``active_until`` or later needs.

        Samples are kept from ``WINDOW_S`` before the loader's last pass ended (or now, while it runs), so that
        a final report can still look back from that end. A quiet stretch, where the totals do not change, keeps
        its first and its latest sample only: a loader idle for hours holds two samples for it, not thousands."""
        history = self.history
        while len(history) > 1 and history[1][0] <= active_until - WINDOW_S:
            history.popleft()
        if len(history) >= 2 and history[-1][1:] == current[1:] == history[-2][1:]:
            history[-1] = current
        else:
            history.append(current)

    def start_pass(self, now: float) -> None:
        """A new pass (epoch) begins: its iterator was created, or a persistent one was reset."""
        self.passes += 1
        self.pass_started = now

    def active(self, now: float) -> bool:
        """Worth reporting: its loader still exists, or it yielded a batch within the window."""
        if self.loader_ref() is not None:
            return True
        return self.last_end is not None and now - self.last_end <= WINDOW_S


def window_stats(then: Totals, now: Totals) -> dict[str, Any]:
    """Data-wait share and steps/s between two samples of the running totals (``LoaderTrack.totals``).

    ``data_wait_share`` is the share of the time the loop was blocked on ``next()``: 1.0 for a loop that waits for
    data all the time, 0.0 for one that never waits (or an idle loader, which makes no steps either).
    ``pass_start_wait_share`` is the part of it spent waiting for the first batch of a pass (an epoch), which with
    ``persistent_workers=False`` includes starting the workers. ``worker_batch_s`` is the seconds a worker spent on
    each batch it made in the window (``worker_clock``); None where none was timed. ``worker_batch_p95_s`` is the
    time under which 95 % of those batches were made, to a quarter-octave bucket; None under ``SLOW_MIN_BATCHES``.
    """
    span = now[0] - then[0]
    batches = now[1] - then[1]
    timed = now[5] - then[5]
    worker_batch_s = max(0.0, now[4] - then[4]) / timed if timed > 0 else None
    counts = tuple(max(0, b - a) for a, b in zip(then[6], now[6], strict=True))
    slow_s = worker_clock.percentile(counts, SLOW_SHARE) if sum(counts) >= SLOW_MIN_BATCHES else None
    if span <= 0:
        return {
            "window_s": 0.0,
            "window_batches": batches,
            "data_wait_share": None,
            "steps_per_s": None,
            "pass_start_wait_share": None,
            "worker_batch_s": worker_batch_s,
            "worker_batch_p95_s": slow_s,
        }
    return {
        "window_s": span,
        "window_batches": batches,
        "data_wait_share": min(1.0, max(0.0, (now[2] - then[2]) / span)),
        "steps_per_s": batches / span,
        "pass_start_wait_share": min(1.0, max(0.0, (now[3] - then[3]) / span)),
        "worker_batch_s": worker_batch_s,
        "worker_batch_p95_s": slow_s,
    }


def _start_method(context: Any) -> str | None:
    if context is None:
        return None
    if isinstance(context, str):
        return context
    get = getattr(context, "get_start_method", None)
    return get() if get is not None else None


def requested_config(loader: Any) -> dict[str, Any]:
    """The settings as the job passed them to ``DataLoader(...)``."""
    return {
        "batch_size": getattr(loader, "batch_size", None),
        "num_workers": getattr(loader, "num_workers", None),
        "pin_memory": getattr(loader, "pin_memory", None),
        "pin_memory_device": getattr(loader, "pin_memory_device", None) or None,
        "prefetch_factor": getattr(loader, "prefetch_factor", None),
        "persistent_workers": getattr(loader, "persistent_workers", None),
        "start_method": _start_method(getattr(loader, "multiprocessing_context", None)),
        "drop_last": getattr(loader, "drop_last", None),
        "timeout_s": getattr(loader, "timeout", None),
    }


def effective_config(loader: Any, iterator: Any) -> dict[str, Any]:
    """The settings the iterator runs with: torch turns some off (``pin_memory`` without an accelerator)."""
    num_workers = getattr(iterator, "_num_workers", None)
    start_method = None
    if num_workers:
        # Without a context of its own the loader uses the default one, whose method is settled (and readable
        # without settling it ourselves) once any process has started.
        start_method = _start_method(getattr(loader, "multiprocessing_context", None))
        start_method = start_method or multiprocessing.get_start_method(allow_none=True)
    return {
        "batch_size": getattr(loader, "batch_size", None),
        "num_workers": num_workers,
        "pin_memory": getattr(iterator, "_pin_memory", None),
        "pin_memory_device": getattr(iterator, "_pin_memory_device", None),
        "prefetch_factor": getattr(iterator, "_prefetch_factor", None) if num_workers else None,
        "persistent_workers": getattr(iterator, "_persistent_workers", None),
        "start_method": start_method,
        "drop_last": getattr(iterator, "_drop_last", None),
        "timeout_s": getattr(iterator, "_timeout", None),
    }


def worker_pids(iterator: Any) -> list[int]:
    """PIDs of the iterator's live workers; none once it has shut them down (end of a non-persistent epoch)."""
    if iterator is None or getattr(iterator, "_shutdown", False):
        return []
    return [w.pid for w in list(getattr(iterator, "_workers", ()) or ()) if getattr(w, "pid", None)]
