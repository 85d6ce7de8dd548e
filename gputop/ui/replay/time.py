"""Times on a replay's timeline: the speeds, the forms a jump accepts, how positions are written, and which parts
of the timeline strip had findings.

Pure functions without Textual, so that the command line can check ``--speed`` and ``--at`` before the dashboard
starts, and the tests can check them directly.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence

from gputop.formatting import fmt_clock, fmt_length

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
"""The steps of ``[`` and ``]``: how many recorded seconds play in one second."""
MIN_SPEED = 0.01
"""The slowest ``--speed``: a recorded second every 100 s. Slower, nothing moves on screen for minutes (``.`` steps);
at ``1e-9`` the next snapshot was due in 30 years, and at ``1e-300`` past what a timer can hold."""
MAX_SPEED = 1000.0
JUMP_FORMS = "HH:MM[:SS], +90s, -5m, 1h02m03s from the start"

# ASCII digits only: a bare \d also matches other scripts' digits, which float() and int() then accept.
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?", re.ASCII)
_OFFSET = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d*)?)s)?", re.ASCII)
_SECONDS = re.compile(r"\d+(?:\.\d*)?", re.ASCII)
_SPEED = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?", re.ASCII)
"""A plain decimal, lowercased: ``float`` also takes ``1_0``, spaces, ``nan``, ``infinity`` and other scripts'
digits."""


def parse_speed(text: str) -> float:
    """``4``, ``x4``, ``×4``, ``4x`` or ``0.25``: a speed from ``MIN_SPEED`` to ``MAX_SPEED``. ValueError
    otherwise."""
    cleaned = text.strip().lower().removeprefix("×").removeprefix("x").removesuffix("x").removesuffix("×")
    if not _SPEED.fullmatch(cleaned):
        raise ValueError(f"not a speed: {text!r} (a number such as 0.5, 4 or x16)")
    value = float(cleaned)
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise ValueError(f"the speed must be from {MIN_SPEED:g} to {MAX_SPEED:g}, got {text}")
    return value


def next_speed(speed: float, faster: bool) -> float:
    """The next step of ``SPEEDS`` above or below ``speed`` (which need not be a step itself); stays at the ends."""
    if faster:
        return next((s for s in SPEEDS if s > speed + 1e-9), max(speed, SPEEDS[-1]))
    return next((s for s in reversed(SPEEDS) if s < speed - 1e-9), min(speed, SPEEDS[0]))


def fmt_speed(speed: float) -> str:
    """``×4``, ``×0.25``."""
    return f"×{speed:g}"


def _offset_seconds(text: str) -> float | None:
    """``90``, ``90s``, ``5m``, ``1h02m03s``: seconds, or None when ``text`` is none of these forms."""
    if _SECONDS.fullmatch(text):
        return float(text)
    match = _OFFSET.fullmatch(text)
    if match is None or not any(match.groups()):
        return None
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def resolve_time(text: str, *, start: float, end: float, current: float) -> float:
    """The time on the timeline that ``text`` names. Raises ValueError with a one-line message.

    - ``HH:MM`` or ``HH:MM:SS``: that wall-clock time (local time) on the recording's day, or on a later day
      the recording reaches; ``HH:MM`` also names the minute the recording starts in.
    - ``+90s``, ``-5m``, ``+1h``, ``+1h30m``: that far from ``current``, stopping at the start or the end.
    - ``1h02m03s``, ``5m``, ``90s``, ``90``: that far from the start.
    """
    entry = text.strip().lower().replace(" ", "")
    if not entry:
        raise ValueError(f"no time given: {JUMP_FORMS}")
    if entry[0] in "+-":
        offset = _offset_seconds(entry[1:])
        if offset is None:
            raise ValueError(f"not an offset: {text.strip()!r} ({JUMP_FORMS})")
        target = current + offset if entry[0] == "+" else current - offset
        return min(end, max(start, target))
    clock = _CLOCK.fullmatch(entry)
    if clock is not None:
        return _clock_time(text.strip(), clock, start, end)
    offset = _offset_seconds(entry)
    if offset is None:
        raise ValueError(f"not a time: {text.strip()!r} ({JUMP_FORMS})")
    if start + offset > end + 1e-6:
        raise ValueError(f"{text.strip()} is past the end: the recording is {fmt_length(end - start)} long")
    return start + offset


def _clock_time(text: str, clock: re.Match[str], start: float, end: float) -> float:
    hours, minutes = int(clock.group(1)), int(clock.group(2))
    seconds = float(clock.group(3)) if clock.group(3) else 0.0
    if hours > 23 or minutes > 59 or seconds >= 60:
        raise ValueError(f"not a time of day: {text!r} ({JUMP_FORMS})")
    precision = 1.0 if clock.group(3) else 60.0
    first_day = day = dt.datetime.fromtimestamp(start).date()
    last_day = dt.datetime.fromtimestamp(end).date()
    while day <= last_day:
        wall = dt.datetime.combine(day, dt.time(hours, minutes)) + dt.timedelta(seconds=seconds)
        at = wall.timestamp()
        if start - precision < at <= end + 1e-6:
            return max(start, at)
        day += dt.timedelta(days=1)
    span = f"{fmt_clock(start, with_date=True)} to {fmt_clock(end, with_date=last_day != first_day)}"
    raise ValueError(f"{text} is not in the recording ({span})")


def strip_marks(
    times: Sequence[float], marks: Sequence[int] | None, width: int, max_gap_s: float = math.inf
) -> list[int | None]:
    """What each of ``width`` columns of the timeline strip shows: None over a gap in the recording (two
    snapshots more than ``max_gap_s`` apart), -1 where there were no findings (or ``marks`` is None: not computed
    yet), else the highest severity rank (0 info, 1 warning, 2 critical) of the findings active in that column.

    A snapshot's findings hold until the next snapshot. ``times`` must not decrease; column ``c`` covers
    ``column_time(c)`` up to ``column_time(c + 1)``.
    """
    columns: list[int | None] = [None] * max(0, width)
    if width <= 0 or not times:
        return columns
    start, span = times[0], times[-1] - times[0]
    for i, at in enumerate(times):
        first = column_of(at, start, span, width)
        last = first
        if i + 1 < len(times) and times[i + 1] - at <= max_gap_s:
            last = max(first, column_of(times[i + 1], start, span, width) - 1)
        mark = -1 if marks is None else marks[i]
        for column in range(first, last + 1):
            held = columns[column]
            if held is None or mark > held:
                columns[column] = mark
    return columns


def column_of(at: float, start: float, span: float, width: int) -> int:
    """The strip column of time ``at`` (the last snapshot lands in the last column)."""
    if span <= 0:
        return 0
    return min(width - 1, max(0, math.floor((at - start) * width / span)))


def column_time(column: float, start: float, span: float, width: int) -> float:
    """The time where strip column ``column`` begins (fractions allowed: ``c + 0.5`` is its middle)."""
    return start + span * column / max(1, width)
