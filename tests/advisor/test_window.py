"""The window's statistics: what a reader gave is kept, and never handed to another reader."""

from __future__ import annotations

import pytest

from gputop.advisor.window import JobSample
from tests.advisor.build import loader, sample, view, window

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_loader_medians_of_different_figures_differ_on_the_same_window():
    w = window(lambda t: sample(t, view(loader(wait=0.25, steps=8.0))))

    assert w.loader_median("data_wait_share") == pytest.approx(0.25)
    assert w.loader_median("steps_per_s") == pytest.approx(8.0)


def test_readers_closing_over_different_values_are_told_apart():
    w = window(lambda t: sample(t, view(loader(wait=0.25))))

    def above(limit: float):
        return lambda s: s.time > limit

    assert w.share(above(-1.0)) == 1.0
    assert w.share(above(1e9)) == 0.0


def test_a_sample_read_in_an_earlier_window_gives_the_same_value_in_the_next():
    samples = [sample(float(t), view(loader(wait=t / 100))) for t in range(30)]
    first = window(lambda t: samples[int(t)], seconds=20.0, every_s=1.0)
    later = type(first)(tuple(samples[5:]))

    assert first.loader_median("data_wait_share") == pytest.approx(0.10)
    assert later.loader_median("data_wait_share") == pytest.approx(0.17)
    assert later.last(4.0).loader_median("data_wait_share") == pytest.approx(0.27)


def test_a_reader_that_is_no_plain_function_is_read_every_time():
    class Reader:
        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, s: JobSample) -> float:
            self.calls += 1
            return 1.0

    reader = Reader()
    w = window(lambda t: sample(t, view(loader())))
    w.median(reader)
    w.median(reader)

    assert reader.calls == 2 * len(w.samples)
