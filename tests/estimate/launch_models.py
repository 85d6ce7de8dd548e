"""Small models for the estimate's GPU assumptions (CUDA's attention kernels, FLOPs, sharding), as factories the
command line and the API take."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

HEADS, SEQUENCE, WIDTH = 4, 256, 64


class Attention(nn.Module):
    """One causal self-attention layer through ``scaled_dot_product_attention``, with attention dropout as GPT-2's."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, sequence, _ = x.shape
        q, k, v = self.qkv(x).view(batch, sequence, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, sequence, WIDTH))  # type: ignore[no-any-return]


def attention_dropout() -> tuple[nn.Module, Any]:
    return Attention(0.1), lambda b: torch.randn(b, SEQUENCE, WIDTH)


def attention() -> tuple[nn.Module, Any]:
    return Attention(0.0), lambda b: torch.randn(b, SEQUENCE, WIDTH)


def mlp() -> tuple[nn.Module, Any]:
    """Four square layers: what sharding splits."""
    layers = nn.Sequential(*(nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(4)))
    return layers, lambda b: torch.randn(b, 256)
