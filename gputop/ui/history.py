"""Recent history of the numbers the dashboard draws as sparklines.

Samples go into one-second bins over a fixed span, so memory stays bounded at any refresh interval (0.1 s or 10 s)
and a sparkline of any width is a cheap pass over at most ``span_s`` bins. The time axis is fixed: the right edge
is now, the left edge is ``span_s`` ago, so a sparkline that only half fills means "only this much history yet".
"""

from __future__ import annotations

import math
from collections import deque

from gputop.model import GPM_PROFILE_FIELDS, Snapshot

HISTORY_S = 300.0
"""How far back the sparklines reach (5 minutes)."""

SPARK_LEVELS = "▁▂▃▄▅▆▇"
"""The full block is left out so that sparklines on neighbouring lines keep a gap between them."""


class _Columns:
    """A trend's sums per sparkline column at one width.

    Columns are aligned to whole multiples of ``span_s / width`` seconds, so a column, once past, never changes:
    the line scrolls left one column at a time instead of every column wobbling on every tick.
    """

    def __init__(self, width: int, span_s: float) -> None:
        self.width = width
        self.seconds = span_s / width
        self.sums: dict[int, list[float]] = {}
        self._dirty: set[int] = set()
        """Columns added to since the line was last drawn: on a tick, usually just the rightmost one."""
        self._line: tuple[int, float, list[str | None], str] | None = None
        """The last line drawn: its right column, its top, each column's block (None: no sample) and the text."""

    def add(self, bin_start: float, total: float, count: int) -> None:
        column = int(bin_start // self.seconds)
        entry = self.sums.setdefault(column, [0.0, 0])
        entry[0] += total
        entry[1] += count
        self._dirty.add(column)
        if len(self.sums) > 2 * self.width:
            oldest = max(self.sums) - self.width
            self.sums = {column: entry for column, entry in self.sums.items() if column >= oldest}
            self._line = None

    def line(self, right: int, top: float) -> str:
        """The sparkline whose rightmost column is ``right``, scaled to ``top``.

        A tick's sample usually lands in the rightmost column and leaves its block as it was: then only that
        column is looked at again and the last line is returned as it is.
        """
        first = right - self.width + 1
        drawn = self._line
        if drawn is not None and drawn[0] == right and drawn[1] == top and len(self._dirty) <= self.width:
            levels = drawn[2]
            changed = False
            for column in self._dirty:
                i = column - first
                if 0 <= i < self.width:
                    level = self._level(column, top)
                    if level != levels[i]:
                        levels[i] = level
                        changed = True
            self._dirty.clear()
            if not changed:
                return drawn[3]
        else:
            levels = [self._level(first + i, top) for i in range(self.width)]
            self._dirty.clear()
        text = _draw(levels)
        self._line = (right, top, levels, text)
        return text

    def _level(self, column: int, top: float) -> str | None:
        entry = self.sums.get(column)
        return _level(entry[0] / entry[1], top) if entry else None


class Trend:
    """One number over time, averaged into one-second bins and forgotten after ``span_s``."""

    WIDTHS_KEPT = 4
    """Sparkline widths with column sums kept up to date (a card, the detail screen, a resize or two)."""

    def __init__(self, span_s: float = HISTORY_S) -> None:
        self.span_s = span_s
        self._bins: deque[list[float]] = deque()  # [bin start, sum, count]
        self._columns: dict[int, _Columns] = {}
        self.latest: float | None = None

    def add(self, time_s: float, value: float | None) -> None:
        """Record a sample; ``None`` (not readable) leaves a gap instead of a made-up zero."""
        self.latest = value
        if value is None:
            return
        start = math.floor(time_s)
        if self._bins and self._bins[-1][0] == start:
            self._bins[-1][1] += value
            self._bins[-1][2] += 1
        else:
            self._bins.append([start, value, 1])
        while self._bins and self._bins[0][0] < time_s - self.span_s:
            self._bins.popleft()
        for columns in self._columns.values():
            columns.add(start, value, 1)

    def peak(self) -> float | None:
        """The highest one-second average in the window, to scale series with no natural top (CPU %)."""
        return max((total / count for _, total, count in self._bins), default=None)

    def sparkline(self, width: int, now: float, top: float = 100.0) -> str:
        """The last ``span_s`` seconds as ``width`` block characters scaled to ``top``; blank where no data yet.

        Each column is the mean of its samples. Columns between two samples that got none (slow refresh, narrow
        bins) repeat the previous column, so a 10 s interval still draws a continuous line.
        """
        if width <= 0:
            return ""
        columns = self._columns_at(width)
        return columns.line(int(math.floor(now) // columns.seconds), top)

    def _columns_at(self, width: int) -> _Columns:
        columns = self._columns.get(width)
        if columns is None:
            if len(self._columns) >= self.WIDTHS_KEPT:
                del self._columns[next(iter(self._columns))]
            columns = self._columns[width] = _Columns(width, self.span_s)
            for start, total, count in self._bins:
                columns.add(start, total, int(count))
        return columns


def _draw(levels: list[str | None]) -> str:
    """The sparkline of columns' blocks: a column without samples between two with samples repeats the one on
    its left, blank before the first and after the last."""
    filled = [i for i, level in enumerate(levels) if level is not None]
    if not filled:
        return " " * len(levels)
    first, last_filled = filled[0], filled[-1]
    chars = []
    last = " "
    for i, level in enumerate(levels):
        if level is not None:
            last = level
            chars.append(level)
        else:
            chars.append(last if first < i < last_filled else " ")
    return "".join(chars)


def _level(value: float, top: float) -> str:
    """A block character for ``value`` on a 0..top scale: a measured zero is the lowest block, not a blank."""
    share = 0.0 if top <= 0 else min(1.0, max(0.0, value / top))
    return SPARK_LEVELS[min(len(SPARK_LEVELS) - 1, int(share * len(SPARK_LEVELS)))]


class GpuHistory:
    """The trends drawn on one GPU card."""

    def __init__(self) -> None:
        self.memory_percent = Trend()
        self.busy_percent = Trend()
        self.sm_percent = Trend()
        self.work = {name: Trend() for name in GPM_WORK_PERCENTS}
        """GPM's other percentages (occupancy, tensor, DRAM, FP pipes) by ``Gpu`` field, for the card's WORK line."""


GPM_WORK_PERCENTS = tuple(name for name in GPM_PROFILE_FIELDS if name.endswith("_percent"))
"""The GPM metrics that are shares of 0..100 and so draw on the same scale as BUSY and SM."""


class ProcessHistory:
    """The trends of one process: for its detail screen, GPU values summed (memory) or maxed (SM) over its GPUs;
    for the training panel, its active DataLoader's numbers from the probe (gaps where there is no report)."""

    def __init__(self, start_time: float | None) -> None:
        self.start_time = start_time
        """Tells a reused PID from the process that had it: a new start time starts a new history."""
        self.gpu_memory_bytes = Trend()
        self.sm_percent = Trend()
        self.cpu_percent = Trend()
        self.data_wait_percent = Trend()
        self.steps_per_s = Trend()
        self.samples_per_s = Trend()
        self.last_seen = 0.0


class History:
    """Trends for every GPU and watched process, fed with every snapshot, paused or not."""

    def __init__(self) -> None:
        self.gpus: dict[int, GpuHistory] = {}
        self.processes: dict[int, ProcessHistory] = {}

    def record(self, snap: Snapshot) -> None:
        now = snap.time
        for gpu in snap.gpus:
            gpu_trends = self.gpus.setdefault(gpu.index, GpuHistory())
            fraction = gpu.memory_used_fraction
            gpu_trends.memory_percent.add(now, None if fraction is None else fraction * 100)
            gpu_trends.busy_percent.add(now, gpu.utilization_gpu_percent)
            gpu_trends.sm_percent.add(now, gpu.sm_activity_percent)
            for name, trend in gpu_trends.work.items():
                trend.add(now, getattr(gpu, name))
        per_pid: dict[int, tuple[float | None, float | None]] = {}
        for proc in snap.processes:
            memory, sm = per_pid.get(proc.pid, (None, None))
            per_pid[proc.pid] = (_sum(memory, proc.gpu_memory_bytes), _max(sm, proc.sm_percent))
        for host in snap.host_processes:
            trends = self.processes.get(host.pid)
            if trends is None or trends.start_time != host.start_time:
                trends = self.processes[host.pid] = ProcessHistory(host.start_time)
            trends.last_seen = now
            memory, sm = per_pid.get(host.pid, (None, None))
            trends.gpu_memory_bytes.add(now, memory)
            trends.sm_percent.add(now, sm)
            trends.cpu_percent.add(now, host.cpu_percent)
        for view in snap.training:
            trends = self.processes.get(view.pid)
            if trends is None:
                continue
            loader = view.loader if view.probe.ok else None
            wait = None if loader is None else loader.data_wait_share
            trends.data_wait_percent.add(now, None if wait is None else wait * 100)
            trends.steps_per_s.add(now, None if loader is None else loader.steps_per_s)
            trends.samples_per_s.add(now, None if loader is None else loader.samples_per_s)
        if any(now - trends.last_seen > HISTORY_S for trends in self.processes.values()):
            self.processes = {pid: t for pid, t in self.processes.items() if now - t.last_seen <= HISTORY_S}


def _sum(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)
