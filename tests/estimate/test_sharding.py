"""Training sharded over N GPUs, estimated as one GPU of N sees it in one process (torch's fake process group), and
checked against a real run of two processes over gloo with torch's own DDP, ZeroRedundancyOptimizer and FSDP2."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from gputop.estimate import EstimateError, estimate
from tests.estimate.helpers import ROOT, in_torch

SHARDS = ["ddp", "zero1", "zero2", "fsdp", "zero3"]
# launch_models.mlp: four Linear(256, 256), float32
WEIGHT, BIAS = 256 * 256 * 4, 256 * 4
FULL = 4 * (WEIGHT + BIAS)
STEP_BYTES = 4
"""Adam's step count: a float32 scalar per parameter tensor."""


@pytest.fixture(scope="module")
def estimated() -> dict[str, Any]:
    return in_torch("sharding", module="launch_torch")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def measured() -> dict[str, list[list[int]]]:
    """Each rank's peak in each round of the real two-process run: all the ways in one pair of processes."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.estimate.sharded_run", "ddp", "zero1", "zero2", "fsdp"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,  # a guard against a hang, not a limit on speed
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def peak(estimated: dict[str, Any], run: str) -> int:
    return estimated[run]["batches"][0]["peak_allocated_bytes"]  # type: ignore[no-any-return]


def at_peak(estimated: dict[str, Any], run: str) -> dict[str, int]:
    return estimated[run]["batches"][0]["at_peak"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("shard", ["ddp", "zero1", "zero2", "fsdp"])
def test_the_estimate_is_within_10_percent_of_the_real_run(estimated, measured, shard):
    # The lowest round of either rank: gloo's own thread drops the last reference to a collective's tensors, and
    # when it does so after the rank has allocated its next ones, that round's peak holds them too (sharded_run.ROUNDS)
    real = min(min(rounds) for rounds in measured[shard])
    assert abs(peak(estimated, shard) - real) <= 0.10 * real, measured[shard]


def test_a_sharded_estimate_leaves_no_process_group_behind(estimated):
    # A notebook or a launcher that estimates first and then starts torch.distributed itself must be able to.
    assert estimated["left initialised"] == []


def test_fsdp_holds_half_the_weights_on_each_of_two_gpus(estimated):
    assert at_peak(estimated, "fsdp")["weights"] == FULL // 2


def test_fsdp_and_zero3_are_one_way(estimated):
    assert peak(estimated, "fsdp") == peak(estimated, "zero3")


def test_fsdp_says_how_much_of_the_peak_is_all_gathered_weights(estimated):
    gathered = estimated["fsdp"]["batches"][0]["gathered_bytes"]
    assert 0 < gathered <= FULL
    assert estimated["ddp"]["batches"][0]["gathered_bytes"] is None


def test_zero2_keeps_the_gathered_weights_to_the_backward_and_so_peaks_above_fsdp(estimated):
    assert peak(estimated, "zero2") > peak(estimated, "fsdp")


def test_ddp_holds_gradient_buckets_as_large_as_the_gradients_beside_them(estimated):
    assert at_peak(estimated, "ddp")["gradients"] == 2 * at_peak(estimated, "one GPU")["gradients"]
    assert peak(estimated, "ddp") - peak(estimated, "one GPU") == FULL


def test_zero1_keeps_the_optimizer_state_of_one_ranks_share(estimated):
    # ZeroRedundancyOptimizer's partition: largest first, each to the emptier rank: two weights and two biases each
    share, tensors = 2 * WEIGHT + 2 * BIAS, 4
    assert estimated["zero1"]["batches"][0]["held"]["optimizer"] == 2 * share + STEP_BYTES * tensors


def test_the_document_carries_the_sharding(estimated):
    assert estimated["fsdp"]["settings"]["shard"] == "fsdp"
    assert estimated["fsdp"]["settings"]["gpus"] == 2
    assert estimated["one GPU"]["settings"]["shard"] is None


@pytest.mark.fast
@pytest.mark.parametrize(
    ("gpus", "shard", "inference", "error"),
    [
        (1, "fsdp", False, "sharding (fsdp) needs 2 GPUs or more"),
        (0, None, False, "the number of GPUs must be 1 or more"),
        (2, "zero9", False, "unknown sharding 'zero9'"),
        (2, None, True, "a sharded estimate is of training"),
    ],
)
def test_a_sharding_that_cannot_be_is_refused_before_the_model_is_built(gpus, shard, inference, error):
    def never() -> None:
        raise AssertionError("built")

    with pytest.raises(EstimateError, match=error.replace("(", r"\(").replace(")", r"\)")):
        estimate(never, [1], gpus=gpus, shard=shard, inference=inference)
