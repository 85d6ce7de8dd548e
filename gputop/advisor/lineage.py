"""The statistics a process's windows carry from one tick to the next: per reader, what it gave for each sample
of the last window, and what was worked out of that (the values in order for a running median, the counts of a
share, exact sums), brought forward by the samples dropped and added instead of read anew.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from gputop.advisor.readers import Reader
from gputop.advisor.samples import JobSample

FORGET_TICKS = 100
"""A window's column or derived window not used for this many ticks is forgotten (``Lineage.next_tick``)."""

T = TypeVar("T")
_UNREAD = object()


class _Column:
    """What one reader gave for the samples of a lineage's last window, and what was worked out of it: the values
    in order (for the median), the known and true values (for a share), the sums (for totals), each with the
    samples it stands for."""

    __slots__ = ("known", "ordered", "ordered_of", "samples", "seen", "sums", "sums_of", "tally_of", "true", "values")

    def __init__(self, samples: tuple[JobSample, ...], values: list[Any], seen: int) -> None:
        self.seen = seen
        """The tick it was last brought forward in (``Lineage.tick``)."""
        self.samples = samples
        self.values = values
        self.ordered: list[float] = []
        self.ordered_of: tuple[JobSample, ...] | None = None
        self.known = self.true = 0
        self.tally_of: tuple[JobSample, ...] | None = None
        self.sums: list[int] = []
        self.sums_of: tuple[JobSample, ...] | None = None


_NOTHING: list[Any] = []


class Lineage:
    """The windows one process's history gives, tick after tick, and what was read of them.

    Each tick's window is the last one with samples dropped at its start and added at its end, so what a reader
    gave for it (its column) and what was worked out of that (the values in order for the median, counts, sums)
    are updated by what changed instead of read anew. A window derived the same way at every tick
    (``JobWindow.last``, ``JobWindow.where``) has a lineage of its own, a child of its parent's. ``ordered``: the
    samples' times never go back, so the last seconds of a window are found by bisection.
    """

    __slots__ = ("children", "columns", "findings", "ordered", "tick")

    def __init__(self) -> None:
        self.tick = 0
        """Counts the windows of the history: what was not used for ``FORGET_TICKS`` of them is forgotten."""
        self.findings: dict[str, tuple[tuple[object, ...], object]] = {}
        """What a rule made of its last inputs (``rules.base.remembered``), by rule."""
        self.columns: dict[int, _Column] = {}
        self.children: dict[Hashable, Lineage] = {}
        self.ordered = True

    def child(self, key: Hashable) -> Lineage:
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = Lineage()
        child.ordered = self.ordered
        child.tick = self.tick
        return child

    def next_tick(self) -> None:
        """A new window of the history; every ``FORGET_TICKS``, forget the columns and derived windows not used in
        that many (a CUDA device the process no longer reports, a rule that stopped at an earlier condition)."""
        self.tick += 1
        if self.tick % FORGET_TICKS == 0:
            self._forget(self.tick - FORGET_TICKS)

    def _forget(self, before: int) -> None:
        for key in [k for k, column in self.columns.items() if column.seen < before]:
            del self.columns[key]
        for name in [k for k, child in self.children.items() if child.tick < before]:
            del self.children[name]
        for child in self.children.values():
            child._forget(before)

    def read(self, reader: Reader[T], samples: tuple[JobSample, ...]) -> list[T]:
        """``reader`` of every sample: the last window's column, less the samples dropped, plus the samples added."""
        values: list[T] = self._advance(reader, samples)[0].values
        return values

    def _advance(
        self, reader: Reader[object], samples: tuple[JobSample, ...]
    ) -> tuple[_Column, tuple[JobSample, ...] | None, list[Any], list[Any]]:
        """The column of ``reader`` brought to ``samples``, with the samples it stood for before (None where it was
        read anew) and the values dropped and added since."""
        key = reader.id
        column = self.columns.get(key)
        if column is None:
            column = self.columns[key] = _Column(samples, [reading(s, reader) for s in samples], self.tick)
            return column, None, _NOTHING, _NOTHING
        column.seen = self.tick
        before = column.samples
        if before is samples:
            return column, before, _NOTHING, _NOTHING
        n = len(before)
        if n > 1 and n == len(samples) and before[1] is samples[0] and before[-1] is samples[-2]:
            dropped, kept = 1, n - 1  # a tick's usual step: one sample out, one in
        else:
            shift = _shift(before, samples)
            if shift is None:
                column = _Column(samples, [reading(s, reader) for s in samples], self.tick)
                self.columns[key] = column
                return column, None, _NOTHING, _NOTHING
            dropped, kept = shift
        old = column.values
        gone = old[:dropped]
        if kept == len(samples) - 1:
            sample = samples[-1]
            readings = sample.readings
            value: Any = readings.get(key, _UNREAD)
            if value is _UNREAD:
                value = readings[key] = reader.read(sample)
            added = [value]
        else:
            added = [reading(s, reader) for s in samples[kept:]]
        values = old[dropped:]
        values.extend(added)
        column.samples = samples
        column.values = values
        return column, before, gone, added

    def median(self, reader: Reader[float | None], samples: tuple[JobSample, ...]) -> float | None:
        """The median of ``reader`` over ``samples``, from the last window's values in order, less the values of the
        samples dropped, plus those of the samples added (where they are all plain numbers).

        A tick's usual step, one sample out and one in from the samples the values in order stand for, is made
        here as ``_advance`` would make it, without its lists of the values dropped and added."""
        key = reader.id
        column = self.columns.get(key)
        last = None if column is None else column.samples
        if (
            column is not None
            and last is not None
            and column.ordered_of is last
            and last is not samples
            and (n := len(last)) > 1
            and n == len(samples)
            and last[1] is samples[0]
            and last[-1] is samples[-2]
        ):
            column.seen = self.tick
            sample = samples[-1]
            readings = sample.readings
            value: Any = readings.get(key, _UNREAD)
            if value is _UNREAD:
                value = readings[key] = reader.read(sample)
            old = column.values
            gone = old[0]
            values = old[1:]
            values.append(value)
            column.samples = samples
            column.values = values
            ordered = column.ordered
            if not (gone is value or (type(gone) is type(value) and gone == value and gone != 0)):  # as _same_one
                if gone is not None:
                    del ordered[bisect.bisect_left(ordered, gone)]
                if value is not None:
                    if value != value:  # NaN: not ordered; the window is sorted anew while it holds one
                        column.ordered_of = None
                        return median_of([v for v in values if v is not None])
                    bisect.insort_right(ordered, value)
        else:
            column, before, dropped, added = self._advance(reader, samples)
            ordered = column.ordered
            if before is not None and column.ordered_of is before:
                if not _same_one(dropped, added):
                    for value in dropped:
                        if value is not None:
                            del ordered[bisect.bisect_left(ordered, value)]
                    for value in added:
                        if value is not None:
                            if value != value:  # NaN, as above
                                column.ordered_of = None
                                return median_of([v for v in column.values if v is not None])
                            bisect.insort_right(ordered, value)
            else:
                known: list[float] = [v for v in column.values if v is not None]
                if not all(v == v for v in known):
                    column.ordered_of = None
                    return median_of(known)
                ordered = column.ordered = sorted(known)
        column.ordered_of = samples
        n = len(ordered)
        if not n:
            return None
        middle = n // 2
        return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    def total(self, reader: Reader[tuple[int, ...]], samples: tuple[JobSample, ...]) -> list[int]:
        """The sums, place by place, of ``reader``'s tuples of whole numbers over ``samples``: the last window's, less
        the samples dropped, plus the samples added (whole numbers: the sums stay exact)."""
        column, before, gone, added = self._advance(reader, samples)
        if before is not None and column.sums_of is before:
            sums = column.sums
            for value in gone:
                for place, n in enumerate(value):
                    sums[place] -= n
            for value in added:
                for place, n in enumerate(value):
                    sums[place] += n
        else:
            values = column.values
            sums = column.sums = [sum(place) for place in zip(*values)] if values else []
        column.sums_of = samples
        return sums

    def share(self, test: Reader[bool | None], samples: tuple[JobSample, ...]) -> float | None:
        """The share of ``samples`` for which ``test`` is true among those where it is known: the last window's
        counts, less the samples dropped, plus the samples added (where ``test`` gives booleans)."""
        column, before, gone, added = self._advance(test, samples)
        if before is not None and column.tally_of is before:
            known, true = column.known, column.true
            for value in gone:
                if value is not None:
                    known -= 1
                    true -= value is True
            for value in added:
                if value is not None:
                    if type(value) is not bool:
                        column.tally_of = None
                        return share_of(column.values)
                    known += 1
                    true += value
        else:
            if any(v is not None and type(v) is not bool for v in column.values):
                column.tally_of = None
                return share_of(column.values)
            known = sum(v is not None for v in column.values)
            true = sum(v is True for v in column.values)
        column.known, column.true, column.tally_of = known, true, samples
        return true / known if known else None


def _same_one(gone: list[object], added: list[object]) -> bool:
    """Whether one value went and the same one came (the same type, and not a zero, whose sign could differ): the
    values in order then stand as they are."""
    if len(gone) != 1 or len(added) != 1:
        return False
    a, b = gone[0], added[0]
    return a is b or (type(a) is type(b) and a == b and a != 0)


def share_of(values: Sequence[bool | None]) -> float | None:
    """The share of the known values that are true."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def median_of(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _shift(before: tuple[JobSample, ...], after: tuple[JobSample, ...]) -> tuple[int, int] | None:
    """How ``after`` continues ``before`` (both runs of one history): ``(dropped, kept)``, the samples dropped from
    the start of ``before`` and those of it kept at the start of ``after``; None when it does not."""
    if not before or not after:
        return None
    first = after[0]
    dropped = 0
    for sample in before:
        if sample is first:
            break
        dropped += 1
    else:
        return None
    kept = len(before) - dropped
    if kept > len(after) or before[-1] is not after[kept - 1]:
        return None
    return dropped, kept


def reading(sample: JobSample, reader: Reader[T]) -> T:
    """What ``reader`` gives for ``sample``: read once, then kept on the sample."""
    readings = sample.readings
    value: Any = readings.get(reader.id, _UNREAD)
    if value is _UNREAD:
        value = readings[reader.id] = reader.read(sample)
    return value  # what ``reader`` gave: each reader is kept by its own id
