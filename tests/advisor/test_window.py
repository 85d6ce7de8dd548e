"""The window's statistics: what a reader gave is kept, and never handed to another reader."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from gputop.advisor.engine import ProcessState
from gputop.advisor.lineage import FORGET_TICKS
from gputop.advisor.loop import worker_activity
from gputop.advisor.readers import DATA_WAIT_SHARE, STEPS_PER_S, Reader, ReaderFamily
from gputop.advisor.samples import JobSample
from gputop.advisor.window import JobWindow
from tests.advisor.build import loader, sample, view, window, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_loader_medians_of_different_figures_differ_on_the_same_window():
    w = window(lambda t: sample(t, view(loader(wait=0.25, steps=8.0))))

    assert w.median(DATA_WAIT_SHARE) == pytest.approx(0.25)
    assert w.median(STEPS_PER_S) == pytest.approx(8.0)


def test_a_sample_read_in_an_earlier_window_gives_the_same_value_in_the_next():
    samples = [sample(float(t), view(loader(wait=t / 100))) for t in range(30)]
    first = window(lambda t: samples[int(t)], seconds=20.0, every_s=1.0)
    later = type(first)(tuple(samples[5:]))

    assert first.median(DATA_WAIT_SHARE) == pytest.approx(0.10)
    assert later.median(DATA_WAIT_SHARE) == pytest.approx(0.17)
    assert later.last(4.0).median(DATA_WAIT_SHARE) == pytest.approx(0.27)


def _history_windows(values: list[float | None], times: list[float]) -> list[JobWindow]:
    """The window of a history at each tick, as the engine makes them: one lineage, samples over 8 s."""
    process = ProcessState()
    windows = []
    for t, value in zip(times, values):
        busy = int(value * 10) % 3 if value is not None and value == value else 0
        process.add(sample(t, view(loader(wait=value), workers(busy, status="running"))), t - 8.0)
        windows.append(process.window())
    return windows


WAITS = Reader(
    "waits half of each step",
    lambda s: None if s.loader is None or s.loader.data_wait_share is None else s.loader.data_wait_share >= 0.5,
)


def _expected_median(w: JobWindow, name: str) -> float | None:
    values = [getattr(s.loader, name) for s in w.samples if s.loader is not None]
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@pytest.mark.parametrize("seed", range(6))
def test_the_statistics_a_history_updates_tick_by_tick_are_those_of_the_whole_window(seed: int):
    rng = random.Random(seed)
    times, t = [], 0.0
    for _ in range(200):
        t += rng.choice((0.25, 0.5, 1.0, 3.0, 9.0))  # irregular ticks, and gaps longer than the window
        times.append(t)
    values: list[float | None] = [rng.choice((None, 0.0, 0.5, round(rng.random(), 2))) for _ in times]

    for w in _history_windows(values, times):
        recent = w.last(3.0)
        for window_ in (w, recent):
            assert window_.median(DATA_WAIT_SHARE) == _expected_median(window_, "data_wait_share")
            assert window_.median(STEPS_PER_S) == _expected_median(window_, "steps_per_s")
        assert recent.samples == tuple(s for s in w.samples if s.time >= w.latest.time - 3.0)
        for window_ in (w, recent):
            fresh = JobWindow(window_.samples)  # no lineage: read anew
            assert window_.share(WAITS) == fresh.share(WAITS)
            assert worker_activity(window_) == worker_activity(fresh)


def test_a_window_holding_nan_has_the_median_a_fresh_sort_gives():
    values: list[float | None] = [0.1, 0.2, math.nan, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.15, 0.25]
    times = [float(n) for n in range(len(values))]

    for w in _history_windows(values, times):
        found, expected = w.median(DATA_WAIT_SHARE), _expected_median(w, "data_wait_share")
        assert found == expected or (math.isnan(found or 0.0) and math.isnan(expected or 0.0))


def test_samples_whose_time_goes_back_are_windowed_as_a_fresh_window_would_be():
    times = [0.0, 1.0, 2.0, 3.0, 2.5, 4.0, 5.0, 1.0, 6.0, 7.0]
    values: list[float | None] = [0.1 * n for n in range(len(times))]

    for w in _history_windows(values, times):
        assert w.last(2.0).samples == tuple(s for s in w.samples if s.time >= w.latest.time - 2.0)
        assert w.last(2.0).median(DATA_WAIT_SHARE) == _expected_median(w.last(2.0), "data_wait_share")


def test_a_filtered_window_of_a_history_keeps_the_samples_its_test_passes():
    values: list[float | None] = [0.1 * (n % 7) for n in range(40)]
    times = [float(n) for n in range(40)]

    test = Reader("waits 30 % or more", lambda s: s.loader is not None and (s.loader.data_wait_share or 0.0) >= 0.3)

    for w in _history_windows(values, times):
        warm = w.where(test)
        assert warm.samples == tuple(s for s in w.samples if test.read(s))
        assert warm.median(DATA_WAIT_SHARE) == _expected_median(warm, "data_wait_share")


def _since(limit: float, s: JobSample) -> bool:
    return s.time >= limit


SINCE = ReaderFamily("since", _since)


def test_what_a_history_read_with_readers_no_longer_used_is_forgotten():
    process = ProcessState()
    for t in range(3 * FORGET_TICKS):
        process.add(sample(float(t), view(loader(wait=0.2))), t - 8.0)
        w = process.window()
        # A reader for a value that changes at every tick: a new column each time.
        w.last(3.0).share(SINCE(float(t)))
        w.where(SINCE(float(t))).median(DATA_WAIT_SHARE)

    lineage = process.lineage
    assert len(lineage.columns) <= FORGET_TICKS + 1
    assert len(lineage.children) <= FORGET_TICKS + 2
    assert all(len(child.columns) <= FORGET_TICKS + 1 for child in lineage.children.values())
