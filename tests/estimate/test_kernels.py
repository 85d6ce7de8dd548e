"""With CUDA's kernels assumed, attention with dropout keeps what the fused flash / memory-efficient kernels keep
(output and log-sum-exp, no score matrix); with the CPU's, the math path's score matrix; and the estimate says
which it assumed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.estimate.helpers import in_torch

# launch_models.Attention at batch 4: 4 heads, a sequence of 256, float32
SCORES_BYTES = 4 * 4 * 256 * 256 * 4


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return in_torch("kernels", module="launch_torch")  # type: ignore[no-any-return]


def peak(found: dict[str, Any], run: str) -> int:
    return found[run]["batches"][0]["peak_allocated_bytes"]  # type: ignore[no-any-return]


def test_with_cuda_kernels_attention_dropout_keeps_no_more_than_attention_without_it(found):
    assert peak(found, "attention_dropout cuda") == peak(found, "attention cuda")


def test_with_cpu_kernels_attention_dropout_keeps_the_score_matrix(found):
    assert peak(found, "attention_dropout cpu") - peak(found, "attention_dropout cuda") >= SCORES_BYTES


def test_without_dropout_both_kernel_choices_agree(found):
    assert peak(found, "attention cpu") == peak(found, "attention cuda")


def test_the_document_says_which_kernels_were_assumed(found):
    assert found["attention cuda"]["settings"]["kernels"] == "cuda"
    assert found["attention cpu"]["settings"]["kernels"] == "cpu"
