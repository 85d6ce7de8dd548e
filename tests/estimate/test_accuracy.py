"""The estimated peak against the peak of the same two training steps run for real on the CPU, measured from the
CPU allocator's events in ``torch.profiler``: within 10 % for six model families at three batch sizes each."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import in_torch

TOLERANCE = 0.10
FAMILIES = ["MLP", "CNN", "transformer encoder", "GRU", "embedding bag", "U-Net (skip connections)"]


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict[str, Any]]]:
    return in_torch("accuracy")  # type: ignore[no-any-return]


def test_every_family_is_measured_at_three_batch_sizes(rows):
    assert list(rows) == FAMILIES
    assert all(len(rows[family]) == 3 for family in FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_estimated_peak_is_within_10_percent_of_a_real_cpu_run(rows, family):
    for row in rows[family]:
        error = row["estimated"] / row["measured"] - 1
        assert abs(error) <= TOLERANCE, row


def test_the_measurement_would_catch_an_estimate_that_left_out_the_activations(rows):
    row = rows["MLP"][-1]
    assert (row["estimated"] - row["activations_at_peak"]) / row["measured"] - 1 < -TOLERANCE
