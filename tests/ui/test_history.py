"""Sparkline history: a fixed 5-minute axis, bounded memory, gaps instead of made-up zeros."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop.ui.app import next_interval
from gputop.ui.history import SPARK_LEVELS, History, Trend
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_a_new_trend_fills_from_the_right() -> None:
    trend = Trend(span_s=100)
    for t in range(90, 100):
        trend.add(t, 50.0)
    line = trend.sparkline(10, now=99)  # the dashboard draws at the time of its newest sample
    assert line[:9] == " " * 9
    assert line[9] != " "


def test_past_columns_stay_put_as_time_goes_on() -> None:
    trend = Trend(span_s=100)
    for t in range(0, 100):
        trend.add(t, float(t))
    before = trend.sparkline(10, now=99)
    trend.add(100, 50.0)
    after = trend.sparkline(10, now=100)
    assert after[:-1] == before[1:]


def test_zero_is_the_lowest_block_and_full_is_the_highest() -> None:
    trend = Trend(span_s=2)
    trend.add(0.5, 0.0)
    trend.add(1.5, 100.0)
    assert trend.sparkline(2, now=1.5) == SPARK_LEVELS[0] + SPARK_LEVELS[-1]


def test_unreadable_samples_leave_a_gap_not_a_zero() -> None:
    trend = Trend(span_s=10)
    trend.add(9.5, None)
    assert trend.sparkline(10, now=10) == " " * 10
    assert trend.latest is None


def test_samples_older_than_the_span_are_forgotten() -> None:
    trend = Trend(span_s=60)
    for t in range(0, 10_000, 2):
        trend.add(t, 1.0)
    assert len(trend._bins) <= 31


def test_slow_sampling_still_draws_a_continuous_line() -> None:
    trend = Trend(span_s=300)
    for t in range(0, 301, 10):
        trend.add(t, 50.0)
    assert " " not in trend.sparkline(100, now=300).strip()


def test_history_follows_every_gpu_and_watched_process() -> None:
    history = History()
    for snap in scenes.history(scenes.training_node, ticks=3):
        history.record(snap)
    assert set(history.gpus) == set(range(8))
    assert scenes.EVAL_PID in history.processes
    eval_memory = sum(p.gpu_memory_bytes or 0 for p in scenes.training_node().processes if p.pid == scenes.EVAL_PID)
    assert history.processes[scenes.EVAL_PID].gpu_memory_bytes.latest == eval_memory


def test_interval_steps_stop_at_a_tenth_of_a_second() -> None:
    assert next_interval(1.0, longer=True) == 2.0
    assert next_interval(1.0, longer=False) == 0.5
    assert next_interval(0.1, longer=False) == 0.1
    assert next_interval(0.3, longer=False) == 0.2


def test_a_reused_pid_starts_a_new_history() -> None:
    history = History()
    snap = scenes.training_node()
    history.record(snap)
    first = history.processes[scenes.NOTEBOOK_PID]
    reborn = tuple(replace(h, start_time=scenes.T0) if h.pid == scenes.NOTEBOOK_PID else h for h in snap.host_processes)
    history.record(replace(snap, time=scenes.T0 + 1, host_processes=reborn))
    assert history.processes[scenes.NOTEBOOK_PID] is not first


def test_a_line_drawn_every_tick_matches_one_drawn_afresh() -> None:
    # The drawn line is kept and only the columns added to are looked at again: it must never go stale.
    import random

    rng = random.Random(7)
    kept = Trend(span_s=60)
    samples: list[tuple[float, float | None]] = []
    t = 0.0
    for step in range(400):
        t += rng.choice((0.3, 1.0, 1.0, 2.5, 7.0)) if step % 97 else 45.0  # now and then a long pause
        value = None if rng.random() < 0.1 else rng.choice((0.0, 13.0, 50.0, 99.0, rng.uniform(0, 100)))
        kept.add(t, value)
        samples.append((t, value))
        top = 100.0 if step % 50 < 40 else 60.0
        for width in (7, 20):
            fresh = Trend(span_s=60)
            for when, v in samples:
                fresh.add(when, v)
            assert kept.sparkline(width, now=t, top=top) == fresh.sparkline(width, now=t, top=top), (step, width)
