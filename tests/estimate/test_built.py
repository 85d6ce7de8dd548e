"""Models as their libraries build them, optimizer arguments and custom steps as users write them: each estimated
as written, with no wrapper."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import in_torch


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return in_torch("built")  # type: ignore[no-any-return]


def test_a_factory_that_reads_numbers_from_tensors_while_it_builds_is_estimated(found):
    assert found["scheduled"] > 0


def test_layers_built_by_deepcopy_count_as_the_same_layers_built_one_by_one(found):
    assert found["copied_encoder"] == found["fresh_encoder"]


def test_a_fused_optimizer_is_built_as_asked_and_keeps_the_same_state(found):
    assert found["fused"]["optimizer"] == found["foreach"]["optimizer"]
    assert found["fused"]["gradients"] == found["foreach"]["gradients"]


def test_a_custom_step_runs_its_forward_passes_in_the_precision_asked(found):
    assert found["custom_step"]["bf16-mixed"] != found["custom_step"]["fp32"]
