"""The search for the largest batch that fits, over cost functions with a known answer."""

from __future__ import annotations

import pytest

from gputop.estimate.search import largest_fitting

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("answer", [1, 2, 3, 7, 8, 9, 100, 1000, 4097])
def test_the_search_finds_the_largest_batch_under_a_threshold(answer):
    assert largest_fitting(lambda batch: batch <= answer).largest == answer


def test_the_search_costs_about_two_log2_of_the_answer():
    asked: list[int] = []
    result = largest_fitting(lambda batch: asked.append(batch) or batch <= 1000)
    assert result.tried == len(asked) <= 2 * 10 + 1
    assert len(set(asked)) == len(asked)


def test_nothing_fits_when_a_batch_of_one_does_not():
    result = largest_fitting(lambda batch: False)
    assert (result.largest, result.tried) == (0, 1)


def test_the_search_stops_at_its_ceiling():
    assert largest_fitting(lambda batch: True, most=64).largest == 64
