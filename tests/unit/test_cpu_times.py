"""The machine's CPU % from one read of /proc/stat, as psutil's cpu_percent computes it."""

from __future__ import annotations

import random

import psutil
from psutil import _ntp as psutil_types  # type: ignore[attr-defined]

from gputop.collect.host import HostCollector, busy_percent, parse_cpu_times

STAT = b"""cpu  1000 20 300 5000 40 5 6 7 8 9
cpu0 500 10 150 2500 20 2 3 3 4 4
cpu1 500 10 150 2500 20 3 3 4 4 5
intr 123456 0 0
ctxt 987654
btime 1700000000
"""


def psutil_percent(before: tuple[int, ...], after: tuple[int, ...]) -> float:
    """psutil's own arithmetic over the same two readings (its private helpers, as ``cpu_percent`` calls them)."""
    fields = len(psutil_types.scputimes._fields)
    t1, t2 = psutil_types.scputimes(*before[:fields]), psutil_types.scputimes(*after[:fields])
    deltas = psutil._cpu_times_deltas(t1, t2)
    total = psutil._cpu_tot_time(deltas)
    return 0.0 if total == 0 else round(psutil._cpu_busy_time(deltas) / total * 100, 1)


def test_the_cpu_lines_and_nothing_else() -> None:
    assert parse_cpu_times(STAT) == [
        (1000, 20, 300, 5000, 40, 5, 6, 7, 8, 9),
        (500, 10, 150, 2500, 20, 2, 3, 3, 4, 4),
        (500, 10, 150, 2500, 20, 3, 3, 4, 4, 5),
    ]


def test_busy_percent_agrees_with_psutil_on_random_readings() -> None:
    rng = random.Random(15)
    for _ in range(2000):
        before = tuple(rng.randint(0, 10**6) for _ in range(10))
        # Mostly growing, sometimes a time that went backwards (psutil counts it as no growth), sometimes idle.
        after = tuple(max(0, t + rng.choice([0, 0, rng.randint(0, 500), -rng.randint(0, 50)])) for t in before)
        assert busy_percent(before, after) == psutil_percent(before, after)


def test_a_host_reading_gives_every_core_after_the_first() -> None:
    collector = HostCollector()
    first = collector.host_info()
    second = collector.host_info()

    assert first.cpu_percent is None
    assert second.cpu_percent is not None and 0.0 <= second.cpu_percent <= 100.0
    assert len(second.cpu_percent_per_core) == len(psutil.cpu_percent(None, percpu=True))
