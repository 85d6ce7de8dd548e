"""Trends of a series over a window: a least-squares fit, a steady rise, a counter's growth."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence

from gputop.advisor.window import MIN_SAMPLES
from gputop.frozen import immutable

STEADY_R2 = 0.9
"""A linear fit explaining 90 % of the variance is a steady trend, not noise (gputop)."""


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares slope (per second) and r² of ``(time, value)`` points; None for fewer than three or no spread.

    A flat series has an r² of 0: it rises not at all, so never steadily.
    """
    if len(points) < MIN_SAMPLES:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in points)
    var_v = sum((v - mean_v) ** 2 for _, v in points)
    if var_t <= 0:
        return None
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    slope = cov / var_t
    r2 = 0.0 if var_v <= 0 else cov * cov / (var_t * var_v)
    return slope, r2


@immutable
class Rise:
    """A series that rises: by ``rise`` over the window, ``slope`` per second, with the fit's ``r2``."""

    rise: float
    slope: float
    r2: float


def steady_rise(points: Sequence[tuple[float, float]], least: float = 0.0) -> Rise | None:
    """How a series rises when it rises steadily: a good linear fit (``STEADY_R2``), and each half of the window
    carrying at least a quarter of the rise, which a single jump (an import, a cache filled once) does not.
    A rise below ``least`` is none (and needs no fit)."""
    if not points:
        return None
    rise = points[-1][1] - points[0][1]
    if rise <= 0 or rise < least:
        return None
    fit = linear_fit(points)
    if fit is None:
        return None
    slope, r2 = fit
    if slope <= 0 or r2 < STEADY_R2:
        return None
    middle = (points[0][0] + points[-1][0]) / 2
    first = [v for t, v in points if t <= middle]
    second = [v for t, v in points if t >= middle]
    if min(first[-1] - first[0], second[-1] - second[0]) < rise / 4:
        return None
    return Rise(rise, slope, r2)


def counter_increase(values: Sequence[float]) -> float:
    """How much a counter grew across a series, ignoring drops (a restarted process starts again from zero)."""
    steps = map(operator.sub, itertools.islice(values, 1, None), values)  # each value less the one before
    return sum(map(max, itertools.repeat(0.0), steps))
