"""A window of one training process's samples, and how long the advisor looks before it speaks.

Rules never read a single snapshot's value as the truth: they take medians, shares and fitted trends over the
last ``window_s`` seconds, so one odd tick neither raises nor clears a finding. What they read of each sample is a
declared ``Reader`` (``readers.py``); what a window works out of it is kept on the window, and carried to the
next tick's window by the process's ``Lineage`` (``lineage.py``).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Hashable
from dataclasses import field
from typing import Any, TypeVar

from gputop.advisor.lineage import Lineage, median_of, reading, share_of
from gputop.advisor.readers import Reader
from gputop.advisor.samples import JobSample
from gputop.frozen import immutable

T = TypeVar("T")

DEFAULT_WINDOW_S = 20.0
IDLE_WINDOWS = 3
"""``gpu-idle`` waits this many windows (60 s by default): checkpoints and evaluations pause a GPU for a while."""
MIN_SAMPLES = 3
"""Fewer samples than this are no window at all."""
MAX_HISTORY_SAMPLES = 2048
"""The most samples the advisor keeps of one process (gputop). Its rules read every sample of a window at every
tick, so a history of n samples costs n at each of its ticks: snapshots closer together than the history's
span divided by this are thinned (``AdvisorConfig.min_gap_s``), and a history whose times go back and forth
keeps its newest samples up to this count. The default window's 90 s of history reach it at one snapshot
every 44 ms, below the sampler's shortest interval (0.1 s): only a window over 45 s at 0.1 s (over 7 minutes
at 1 s), or a recording with rows closer than any sampler writes them, is thinned."""


@immutable
class AdvisorConfig:
    """How long the advisor looks before it speaks.

    ``window_s`` is both the span the rules' statistics cover and how long a condition must hold before its
    finding is raised (and stop holding before it is cleared). ``idle_s`` is how long a GPU must sit idle for
    ``gpu-idle``; it defaults to three windows. Tests use windows of a few seconds.
    """

    window_s: float = DEFAULT_WINDOW_S
    idle_s: float | None = None

    @property
    def gpu_idle_s(self) -> float:
        return self.idle_s if self.idle_s is not None else IDLE_WINDOWS * self.window_s

    @property
    def history_s(self) -> float:
        """How much history the advisor keeps per process: enough for the longest rule."""
        return max(self.window_s, self.gpu_idle_s) * 1.5

    @property
    def min_gap_s(self) -> float:
        """The shortest time between two snapshots the advisor judges: one closer to the last one judged is left
        out, and the findings stand as they were, so a history holds at most ``MAX_HISTORY_SAMPLES``."""
        return self.history_s / MAX_HISTORY_SAMPLES


def replay_config(asked_s: float | None, recorded_s: float | None) -> AdvisorConfig:
    """The advisor's settings for a recording: the window asked for (``--window``), else the one the run that
    recorded it judged it with, else the default. A recording judged with another window than its run's gives other
    findings and other numbers (a 12 s run at a 3 s window, judged at 20 s, has none)."""
    window_s = asked_s if asked_s is not None else recorded_s
    return AdvisorConfig() if window_s is None else AdvisorConfig(window_s=window_s)


_MISSING = object()


_time: Callable[[JobSample], float] = operator.attrgetter("time")


@immutable
class JobWindow:
    """Samples of one training process, oldest first.

    Samples are immutable and readers pure, so what a reader gave for a sample is kept on the sample, and a
    window's statistics on the window: the rules of one tick share them, and the next tick's window reads only
    its new sample. A window of the advisor's history has a ``lineage``: its statistics are then updated from the
    last tick's window's by the samples that changed.
    """

    samples: tuple[JobSample, ...]
    lineage: Lineage | None = field(default=None, repr=False, compare=False)
    _memo: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def latest(self) -> JobSample:
        return self.samples[-1]

    @property
    def span_s(self) -> float:
        return self.samples[-1].time - self.samples[0].time if self.samples else 0.0

    def last(self, seconds: float) -> JobWindow:
        """The samples of the last ``seconds``."""
        if not self.samples:
            return self
        key = ("last", seconds)
        found = self._memo.get(key)
        if found is None:
            samples = self.samples
            since = samples[-1].time - seconds
            lineage = self.lineage
            if lineage is not None and lineage.ordered:
                recent = samples[bisect.bisect_left(samples, since, key=_time) :]
            else:
                recent = tuple(s for s in samples if s.time >= since)
            found = self._memo[key] = JobWindow(recent, None if lineage is None else lineage.child(key))
        return found  # a JobWindow: each key is asked of one method

    def where(self, test: Reader[bool]) -> JobWindow:
        """The samples for which ``test`` is true."""
        key = ("where", test.id)
        found = self._memo.get(key)
        if found is None:
            samples = tuple(itertools.compress(self.samples, self._read(test)))
            lineage = self.lineage
            found = self._memo[key] = JobWindow(samples, None if lineage is None else lineage.child(key))
        return found

    def recent(self, seconds: float) -> JobWindow | None:
        """The samples of the last ``seconds`` where they cover them (``covers``), else None: worked out once per
        window, as every rule asks."""
        key = ("recent", seconds)
        memo = self._memo
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            last = self.last(seconds)
            found = memo[key] = last if last.covers(seconds) else None
        return found

    def covers(self, seconds: float) -> bool:
        """Whether there are enough samples, spread over most of ``seconds``, to judge a window."""
        return len(self.samples) >= MIN_SAMPLES and self.span_s >= 0.6 * seconds

    def _read(self, reader: Reader[T]) -> list[T]:
        """``reader`` of every sample, from each sample's readings where it read it before. Not to be changed: the
        list may be kept for the next tick's window."""
        if self.lineage is not None:
            return self.lineage.read(reader, self.samples)
        return [reading(sample, reader) for sample in self.samples]

    def column(self, reader: Reader[T]) -> list[T]:
        """``reader`` of every sample, in order (not to be changed: the next tick's window may start from it)."""
        return self._read(reader)

    def rise(self, reader: Reader[float | None]) -> float | None:
        """The last known value of ``reader`` less the first (None where none is known): what ``steady_rise`` of
        the ``points`` would call the rise, found without them."""
        values = self._read(reader)
        for first in values:
            if first is not None:
                break
        else:
            return None
        for last in reversed(values):
            if last is not None:
                return last - first
        return None  # not reached: a value is known

    def values(self, reader: Reader[float | None]) -> list[float]:
        return [v for v in self._read(reader) if v is not None]

    def points(self, reader: Reader[float | None]) -> list[tuple[float, float]]:
        """``(time, value)`` of every sample where the value is known."""
        return [(s.time, v) for s, v in zip(self.samples, self._read(reader)) if v is not None]

    def median(self, reader: Reader[float | None]) -> float | None:
        """The median of ``reader``'s known values (None where none is known), kept by the reader itself: no other
        key of the window's is a reader."""
        memo = self._memo
        found = memo.get(reader, _MISSING)
        if found is _MISSING:
            lineage = self.lineage
            found = memo[reader] = (
                median_of(self.values(reader)) if lineage is None else lineage.median(reader, self.samples)
            )
        return found

    def share(self, test: Reader[bool | None]) -> float | None:
        """The share of samples for which ``test`` is true, among those where it is known."""
        key = ("share", test)
        memo = self._memo
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            lineage = self.lineage
            found = memo[key] = share_of(self._read(test)) if lineage is None else lineage.share(test, self.samples)
        return found

    def total(self, reader: Reader[tuple[int, ...]]) -> list[int]:
        """The sums, place by place, of ``reader``'s tuples of whole numbers over the samples (none without
        samples). Not to be changed: the next tick's window may start from it."""
        if self.lineage is not None:
            return self.lineage.total(reader, self.samples)
        values = self._read(reader)
        return [sum(place) for place in zip(*values)] if values else []

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked of this window, what it gave after that."""
        memo = self._memo
        if key not in memo:
            memo[key] = compute()
        return memo[key]  # what compute() gave: each key is asked with one compute

    def cached_of(self, key: Hashable, compute: Callable[[JobWindow], T]) -> T:
        """``compute(self)`` the first time ``key`` is asked of this window, what it gave after that: ``cached``
        for a function of the window alone, which needs no closure made at every call."""
        memo = self._memo
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            found = memo[key] = compute(self)
        return found  # what compute() gave: each key is asked with one compute
