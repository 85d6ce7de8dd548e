"""The torch work of the tests of the estimate's GPU assumptions (CUDA's attention kernels, FLOPs, sharding), run in
a process of its own as ``in_torch.py``'s is (``python -m tests.estimate.launch_torch WHAT``): one JSON document on
stdout."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

warnings.simplefilter("ignore")  # torch's own (no NumPy) would mix with the document

from gputop.estimate import estimate  # noqa: E402
from gputop.estimate.defaults import SHARDS  # noqa: E402
from gputop.estimate.render import report_to_dict  # noqa: E402

MODELS = "tests.estimate.launch_models"


def kernels() -> dict[str, Any]:
    """The attention layer with and without dropout, under each kernel choice, at batch 4."""
    return {
        f"{model} {k}": report_to_dict(estimate(f"{MODELS}:{model}", [4], kernels=k))  # type: ignore[arg-type]
        for model in ("attention", "attention_dropout")
        for k in ("cuda", "cpu")
    }


def flops() -> dict[str, Any]:
    """The four-layer MLP's step at batch 8, its forward pass, and the attention layer's step, on an H100 in bf16."""
    return {
        "mlp": report_to_dict(estimate(f"{MODELS}:mlp", [8], gpu_model="H100", precision="bf16-mixed")),
        "mlp inference": report_to_dict(estimate(f"{MODELS}:mlp", [8], inference=True)),
        "attention": report_to_dict(estimate(f"{MODELS}:attention", [4])),
    }


def sharding() -> dict[str, Any]:
    """The four-layer MLP at batch 8 on each of two GPUs, each way of sharding, and on one GPU."""
    import torch.distributed as dist

    found: dict[str, Any] = {"one GPU": report_to_dict(estimate(f"{MODELS}:mlp", [8]))}
    left = []  # the shardings after whose estimate this process still had a process group
    for shard in SHARDS:
        found[shard] = report_to_dict(estimate(f"{MODELS}:mlp", [8], gpus=2, shard=shard))
        if dist.is_initialized():
            left.append(shard)
    found["left initialised"] = left
    return found


if __name__ == "__main__":
    sys.stdout.write(json.dumps({"kernels": kernels, "flops": flops, "sharding": sharding}[sys.argv[1]]()))
