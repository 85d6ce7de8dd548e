"""``gputop.collect.sampler.every``: snapshots on the calling thread, each due an interval after the previous."""

from __future__ import annotations

import contextlib
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from gputop.collect import sampler
from gputop.collect.sampler import every

pytestmark = pytest.mark.fast


class Clock:
    """Monotonic and wall time that move only when a wait or a snapshot says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeMaker:
    """Makes snapshots stamped with the fake clock; a snapshot costs ``cost_s`` before its stamp."""

    def __init__(self, clock: Clock, cost_s: float = 0.0) -> None:
        self.clock = clock
        self.cost_s = cost_s
        self.calls: list[str] = []

    def _snap(self) -> Any:
        self.clock.now += self.cost_s
        return SimpleNamespace(time=self.clock.now)

    def start(self) -> None:
        self.calls.append("start")

    def one_shot(self) -> Any:
        self.calls.append("one_shot")
        return self._snap()

    def snapshot(self) -> Any:
        self.calls.append("snapshot")
        return self._snap()

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(sampler.time, "time", clock)
    return clock


def waiter(clock: Clock, waits: list[float], stop_after: int | None = None) -> Any:
    def wait(timeout_s: float) -> bool:
        waits.append(timeout_s)
        clock.now += timeout_s
        return stop_after is not None and len(waits) >= stop_after

    return wait


def test_the_first_is_a_one_shot_and_count_stops_it_then_the_maker_is_closed(clock: Clock) -> None:
    maker = FakeMaker(clock)
    waits: list[float] = []

    snaps = list(every(1.0, maker=maker, count=3, wait=waiter(clock, waits), clock=clock))

    assert [s.time for s in snaps] == [1000.0, 1001.0, 1002.0]
    assert maker.calls == ["one_shot", "snapshot", "snapshot", "close"]
    assert waits == [1.0, 1.0]


def test_each_snapshot_starts_an_interval_after_the_previous_ones_time(clock: Clock) -> None:
    maker = FakeMaker(clock, cost_s=0.1)
    waits: list[float] = []
    times = []

    for snap in every(1.0, maker=maker, count=3, wait=waiter(clock, waits), clock=clock):
        times.append(snap.time)
        clock.now += 0.3  # the caller's own work

    assert waits == pytest.approx([0.7, 0.7])  # 1 s from the stamp, less the caller's 0.3 s
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([1.1, 1.1])  # and takes its 0.1 s


def test_a_slow_caller_gets_the_next_snapshot_at_once(clock: Clock) -> None:
    waits: list[float] = []
    gen = every(0.5, maker=FakeMaker(clock), count=2, wait=waiter(clock, waits), clock=clock)
    next(gen)
    clock.now += 2.0
    next(gen)

    assert waits == [0.0]


def test_a_duration_caps_the_last_wait_and_takes_a_last_snapshot_when_it_is_up(clock: Clock) -> None:
    maker = FakeMaker(clock)
    waits: list[float] = []

    snaps = list(every(1.0, maker=maker, duration_s=2.5, wait=waiter(clock, waits), clock=clock))

    assert [s.time - 1000.0 for s in snaps] == pytest.approx([0.0, 1.0, 2.0, 2.5])
    assert waits == pytest.approx([1.0, 1.0, 0.5])
    assert maker.calls[-1] == "close"


def test_now_starts_the_maker_and_snapshots_at_once(clock: Clock) -> None:
    maker = FakeMaker(clock)

    list(every(1.0, maker=maker, first="now", count=1, wait=waiter(clock, []), clock=clock))

    assert maker.calls == ["start", "snapshot", "close"]


def test_later_waits_an_interval_first_and_a_wait_that_says_stop_ends_it(clock: Clock) -> None:
    maker = FakeMaker(clock)
    waits: list[float] = []

    snaps = list(every(2.0, maker=maker, first="later", wait=waiter(clock, waits, stop_after=3), clock=clock))

    assert [s.time - 1000.0 for s in snaps] == [2.0, 4.0]
    assert waits == [2.0, 2.0, 2.0]
    assert maker.calls == ["start", "snapshot", "snapshot", "close"]


def test_a_stop_before_the_first_snapshot_yields_none(clock: Clock) -> None:
    maker = FakeMaker(clock)

    assert list(every(1.0, maker=maker, first="later", wait=lambda s: True, clock=clock)) == []
    assert maker.calls == ["start", "close"]


def test_leaving_early_closes_the_maker(clock: Clock) -> None:
    maker = FakeMaker(clock)

    with contextlib.closing(every(1.0, maker=maker, wait=waiter(clock, []), clock=clock)) as snaps:
        for _ in snaps:
            break

    assert maker.calls == ["one_shot", "close"]


def test_an_error_in_the_caller_closes_the_maker(clock: Clock) -> None:
    maker = FakeMaker(clock)

    with pytest.raises(RuntimeError), contextlib.closing(every(1.0, maker=maker, clock=clock)) as snaps:
        for _ in snaps:
            raise RuntimeError

    assert maker.calls[-1] == "close"
