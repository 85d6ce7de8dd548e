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
