"""Which attention kernel the step is estimated with: CUDA's fused ones, or the CPU's.

The estimate runs the CPU's operators (the fake tensors are CPU tensors), and the CPU's
``scaled_dot_product_attention`` with dropout takes the math path: it keeps the batch × heads × sequence² score
matrix (and its dropout mask) for the backward pass. On a GPU the same call runs FlashAttention-2 or the
memory-efficient kernel (``torch.nn.attention.SDPBackend``), both of which support dropout and save only the output
and one log-sum-exp per query row (and the random generator's seed and offset), never the score matrix: GPT-2 XL
at batch 1 is 40.3 GiB estimated the CPU's way against 29.0 GiB with dropout off. With ``cuda`` kernels the call is
routed to the CPU's flash kernel, which saves what CUDA's flash kernel saves (output and log-sum-exp) and accepts
dropout, so the fake step keeps what a GPU's would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from gputop.estimate.defaults import Kernels


class _FusedAttention(TorchFunctionMode):
    """``F.scaled_dot_product_attention`` run as the fused flash kernel whatever its dropout: the CPU would take
    the math path for dropout, CUDA would not."""

    def __init__(self) -> None:
        super().__init__()
        self.routed = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            fused = _as_flash(*args, **kwargs)
            if fused is not None:
                self.routed += 1
                return fused
        return func(*args, **kwargs)


def _as_flash(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor | None:
    """The flash kernel's output, or None where it does not take these arguments (not 4-D, or key and value
    with fewer heads than the query), which then run as they were called."""
    if dropout_p == 0.0 or query.dim() != 4 or key.shape[1] != query.shape[1] or value.shape[1] != query.shape[1]:
        return None  # without dropout the CPU already runs the flash kernel when it can
    out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )
    return out


@contextlib.contextmanager
def assumed(kernels: Kernels) -> Iterator[None]:
    """The step's attention run as ``kernels`` would run it (``cpu``: as it is)."""
    if kernels == "cpu":
        yield
        return
    with _FusedAttention():
        yield
