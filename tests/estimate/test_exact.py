"""Weights, gradients and optimizer state equal their analytic byte counts for every optimizer and precision; the
layer table's parameter counts equal the textbook formulas; a custom step is run as given."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import in_torch

FLOAT_BYTES = {"fp32": 4, "tf32": 4, "bf16-mixed": 4, "fp16-mixed": 4, "bf16": 2}
STEP_BYTES = 4
"""Adam, AdamW and Adagrad count their steps in a float32 scalar tensor per parameter tensor."""

# small_net in in_torch.py: Conv2d(3, 8, 3), BatchNorm2d(8), Linear(8 * 8 * 8, 10): six parameter tensors
PARAMETERS = (3 * 8 * 3 * 3 + 8) + 2 * 8 + (8 * 8 * 8 * 10 + 10)
TENSORS = 6
OPTIMIZER_STATE = {
    "sgd {}": lambda nbytes: 0,
    "sgd {'momentum': 0.9}": lambda nbytes: nbytes,
    "adam {}": lambda nbytes: 2 * nbytes + STEP_BYTES * TENSORS,
    "adam {'amsgrad': True}": lambda nbytes: 3 * nbytes + STEP_BYTES * TENSORS,
    "adamw {}": lambda nbytes: 2 * nbytes + STEP_BYTES * TENSORS,
    "Adagrad {}": lambda nbytes: nbytes + STEP_BYTES * TENSORS,
}


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return in_torch("exact")  # type: ignore[no-any-return]


@pytest.mark.parametrize("precision", list(FLOAT_BYTES))
@pytest.mark.parametrize("optimizer", list(OPTIMIZER_STATE))
def test_weights_gradients_and_optimizer_state_equal_their_analytic_bytes(found, optimizer, precision):
    parameter_bytes = PARAMETERS * FLOAT_BYTES[precision]
    buffer_bytes = 2 * 8 * FLOAT_BYTES[precision] + 8  # running mean and variance; num_batches_tracked, int64
    held = found["held"][f"{optimizer} {precision}"]
    assert held["weights"] == parameter_bytes + buffer_bytes
    assert held["gradients"] == parameter_bytes
    assert held["optimizer"] == OPTIMIZER_STATE[optimizer](parameter_bytes)


def conv(cin: int, cout: int, k: int = 3) -> int:
    return cin * cout * k * k + cout


def linear(m: int, n: int) -> int:
    return m * n + n


def test_the_layer_table_counts_parameters_as_the_textbook_formulas_do(found):
    vgg = found["vgg"]
    rows = {row["name"]: row for row in vgg["layers"]}
    expected = {
        "0": conv(3, 16),
        "1": 2 * 16,  # BatchNorm: a scale and a shift per channel
        "3": conv(16, 16),
        "4": 2 * 16,
        "7": conv(16, 32),
        "8": 2 * 32,
        "12": linear(32 * 8 * 8, 128),
        "14": linear(128, 10),
    }
    assert {name: rows[name]["parameters"] for name in expected} == expected
    assert all(rows[name]["parameter_bytes"] == 4 * count for name, count in expected.items())
    assert [row["name"] for row in vgg["layers"]] == ["", *(str(i) for i in range(15))]
    assert vgg["parameters"] == sum(expected.values())


def test_an_embedding_holds_n_by_w_parameters(found):
    layers = found["embedding"]["layers"]
    assert (layers[1]["kind"], layers[1]["parameters"]) == ("Embedding", 1000 * 32)


def test_the_layer_table_shows_what_each_layer_saves_for_the_backward_pass(found):
    vgg = found["vgg"]
    rows = {row["name"]: row for row in vgg["layers"]}
    batch_input = 2 * 3 * 32 * 32 * 4
    assert rows["0"]["saved_bytes"] == batch_input  # a convolution keeps its input
    assert rows["2"]["saved_bytes"] == 2 * 16 * 32 * 32 * 4  # a ReLU keeps its output
    assert rows["13"]["saved_bytes"] == 2 * 128 * 4
    assert rows[""]["saved_bytes"] == vgg["batches"][0]["held"]["activations"]
    assert rows[""]["checkpoint_saves_bytes"] == rows[""]["saved_bytes"] - batch_input


def test_a_custom_step_runs_as_given(found):
    custom, default = found["custom_step"]["batches"][0], found["default_step"]["batches"][0]
    assert custom["held"]["gradients"] == default["held"]["gradients"]
    assert custom["held"]["optimizer"] == default["held"]["optimizer"]
    assert custom["peak_allocated_bytes"] > default["peak_allocated_bytes"]  # the second backward adds to the first
