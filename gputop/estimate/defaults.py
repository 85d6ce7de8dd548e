"""The memory estimate's defaults and choices that ``gputop estimate``'s options show: a module of their own, which
the package's lazy face lets the command line import without the estimator."""

from __future__ import annotations

from typing import Literal

Precision = Literal["fp32", "tf32", "bf16-mixed", "fp16-mixed", "bf16"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "tf32", "bf16-mixed", "fp16-mixed", "bf16")
"""``tf32`` changes how matrix products round, not what they store: its memory is fp32's. The ``-mixed`` ones keep
fp32 weights and run the forward pass under autocast; ``bf16`` holds the whole model in bfloat16."""

DEFAULT_MARGIN = 0.10
"""The share of the GPU's memory left free when judging whether a batch fits: fragmentation and what the
estimate does not see (other processes, NCCL buffers, the allocator's behaviour under pressure)."""

CUDA_CONTEXT_BYTES = 512 * 1024**2
"""What a PyTorch process holds on the GPU outside its caching allocator: the CUDA context with its lazily loaded
kernels (287,047,680 bytes measured with ``CUDA_MODULE_LOADING=LAZY`` in pytorch/pytorch#86509, the default since
PyTorch 1.13 and CUDA 12.2) plus the cuBLAS and cuDNN handles and kernels a training step loads. It varies with the
GPU, the driver and the libraries (about 300 to 600 MiB); ``context_bytes`` overrides it."""

Kernels = Literal["cuda", "cpu"]
KERNELS: tuple[Kernels, ...] = ("cuda", "cpu")
"""Whose attention kernels a step is estimated with: ``cuda``, the fused ones a GPU runs (``gputop.estimate.kernels``),
or ``cpu``, the operators the estimate itself runs."""

ASSUMED_KERNELS: dict[Kernels, str] = {
    "cuda": "attention by CUDA's fused kernels (flash / memory-efficient SDPA: output and log-sum-exp saved, "
    "no score matrix, dropout included)",
    "cpu": "attention by the CPU's kernels (with dropout: the math path, the score matrix saved)",
}
"""What each choice assumes, as the estimate says it."""

Shard = Literal["ddp", "fsdp", "zero1", "zero2", "zero3"]
SHARDS: tuple[Shard, ...] = ("ddp", "fsdp", "zero1", "zero2", "zero3")
"""How a training step is spread over GPUs (``gputop.estimate.sharding``): ``ddp`` replicates everything,
``zero1`` shards the optimizer state, ``zero2`` also the gradients, ``fsdp`` (``zero3``) also the weights."""

SHARD_HOLDS: dict[Shard, str] = {
    "ddp": "DDP: all weights, gradients and optimizer state, and DDP's gradient buckets (as large as the gradients)",
    "zero1": "ZeRO-1 (ZeroRedundancyOptimizer over DDP): all weights and gradients, DDP's gradient buckets, and the "
    "optimizer state of the largest 1/{n} share of the parameters",
    "zero2": "ZeRO-2 (FSDP2 fully_shard, reshard_after_forward=False): 1/{n} of the weights, gradients and optimizer "
    "state; each block's all-gathered weights kept from its forward to its backward",
    "fsdp": "FSDP2 fully_shard (ZeRO-3): 1/{n} of the weights, gradients and optimizer state; each block's weights "
    "all-gathered for its forward and again for its backward",
    "zero3": "ZeRO-3 (FSDP2 fully_shard): 1/{n} of the weights, gradients and optimizer state; each block's weights "
    "all-gathered for its forward and again for its backward",
}
"""What one GPU holds under each way of sharding over ``n`` GPUs, as the estimate says it."""
