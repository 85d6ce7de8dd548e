"""Models as their libraries build them, optimizer arguments and custom steps as users write them: each estimated
as written, with no wrapper."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import ROOT, in_torch


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


def test_a_models_own_loss_is_the_loss_beside_its_logits(found):
    assert found["own_loss"] is True


def test_the_layer_table_counts_a_tied_weight_once(found):
    tied = found["tied"]
    assert sum(row["parameters"] for row in tied["layers"]) == tied["parameters"] == 100 * 16 + 2 * (16 * 16 + 16)


def test_the_layer_table_shows_a_list_of_blocks_above_its_blocks(found):
    rows = [(row["name"], row["depth"]) for row in found["tied"]["layers"]]
    after_dropout = rows[rows.index(("transformer.drop", 2)) + 1 :]
    assert after_dropout[:3] == [("transformer.h", 2), ("transformer.h.0", 3), ("transformer.h.1", 3)]


def test_checkpointing_wraps_every_repeated_block_across_stages(found):
    assert found["checkpointed"]["resnet"] == "16 Bottleneck blocks"


def test_checkpointing_wraps_the_blocks_of_an_encoder_and_a_decoder_not_their_parts(found):
    assert found["checkpointed"]["encoder_decoder"] == "6 Block blocks"


def test_checkpointing_a_model_of_single_layers_splits_its_longest_sequence_into_segments(found):
    assert found["checkpointed"]["vgg"] == "0 (Sequential of 14) in 4 segments"


def test_checkpointing_wraps_the_class_the_user_names(found):
    assert found["checkpointed"]["named"] == "6 _Mlp blocks"


def test_the_estimate_says_what_checkpointing_wrapped_and_keeps_fewer_activations(found):
    named, plain = found["checkpointing"]["Bottleneck"], found["checkpointing"]["None"]
    assert named["settings"]["checkpointing"] is True
    assert named["checkpointed"] == "16 Bottleneck blocks"
    assert named["batches"][0]["held"]["activations"] < plain["batches"][0]["held"]["activations"]


def test_a_python_exception_in_the_models_code_names_its_file_and_line_not_an_operator(found):
    source = (ROOT / "tests/estimate/built_models.py").read_text().splitlines()
    line = 1 + source.index('        raise ValueError("the batch is the wrong shape")')
    assert found["complaint"] == (
        f"the model failed under FakeTensorMode at tests/estimate/built_models.py:{line} (batch size 1): "
        "ValueError: the batch is the wrong shape"
    )
