"""A step's FLOPs before launch, as the live MFU counts them (torch's FLOP counter: matrix products of the forward
and backward passes), and its time on a named GPU from the GPU's peak and the published MFU band."""

from __future__ import annotations

from typing import Any

import pytest

from gputop.estimate.flops import MFU_BAND, find_gpu, step_time
from tests.estimate.helpers import in_torch

BATCH, WIDTH, LAYERS = 8, 256, 4
LAYER_FLOPS = 2 * BATCH * WIDTH * WIDTH
"""One 256 x 256 linear layer's product at batch 8: a multiply and an add per weight per sample."""


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return in_torch("flops", module="launch_torch")  # type: ignore[no-any-return]


def test_a_training_step_counts_the_forward_product_and_both_backward_ones_but_the_first_layers_input_grad(found):
    # backward: every layer's weight gradient, and the input gradient of all but the first (its input needs none)
    assert found["mlp"]["flops_per_step"] == LAYERS * LAYER_FLOPS + LAYERS * LAYER_FLOPS + (LAYERS - 1) * LAYER_FLOPS


def test_inference_counts_the_forward_pass_alone(found):
    assert found["mlp inference"]["flops_per_step"] == LAYERS * LAYER_FLOPS


def test_fused_attention_is_counted_as_cudas_flash_kernel_is(found):
    b, heads, s, width = 4, 4, 256, 64  # launch_models.Attention at batch 4
    # qkv: forward and weight gradient (its input needs none); out: forward, weight and input gradients
    linear = 2 * b * s * width * (3 * width) * 2 + 2 * b * s * width * width * 3
    # torch's formulas for the flash kernel: the forward's two B x H x S x S x D products, the backward 2.5 times that
    attention = 4 * b * heads * s * s * (width // heads)
    assert found["attention"]["flops_per_step"] == linear + attention + 2.5 * attention


def test_the_step_time_is_the_flops_over_the_peak_at_each_end_of_the_mfu_band(found):
    time = found["mlp"]["step_time"]
    flops = found["mlp"]["flops_per_step"]
    assert time["gpu"] == "H100 SXM"
    assert time["peak_tflops"] == 989.5  # bf16-mixed runs its products in bf16
    assert time["fastest_s"] == pytest.approx(flops / (989.5e12 * MFU_BAND[1]))
    assert time["slowest_s"] == pytest.approx(flops / (989.5e12 * MFU_BAND[0]))
    assert "PaLM" in time["mfu_source"] and "datasheet" in time["peak_source"]


@pytest.mark.fast
@pytest.mark.parametrize("name", ["H100", "h100 sxm", "NVIDIA H100 80GB HBM3", "H100 SXM"])
def test_a_gpu_is_found_by_its_model_its_first_word_or_its_nvml_name(name):
    found = find_gpu(name)
    assert found is not None and found.model == "H100 SXM"


@pytest.mark.fast
def test_an_unknown_gpu_is_none():
    assert find_gpu("Z9000") is None


@pytest.mark.fast
def test_a_gpu_without_a_peak_for_the_precision_gives_no_time():
    v100 = find_gpu("V100")
    assert v100 is not None
    assert step_time(10**12, v100, "bf16-mixed") is None
