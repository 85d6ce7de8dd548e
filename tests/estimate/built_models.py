"""Models built the way libraries build them, for the estimate to take as they are written."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

WIDTH = 64


def scheduled() -> tuple[nn.Module, Any]:
    """A drop-out schedule computed from a tensor while building, as timm computes its drop-path rates."""
    rates = torch.linspace(0, 0.1, 4).tolist()
    net = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Dropout(rate)) for rate in rates])
    return net, lambda b: torch.randn(b, 32)


def _layer() -> nn.Module:
    return nn.TransformerEncoderLayer(WIDTH, 4, 2 * WIDTH, batch_first=True)


def copied_encoder() -> tuple[nn.Module, Any]:
    """``nn.TransformerEncoder``, which deep-copies the layer it is given for each of its layers."""
    net = nn.TransformerEncoder(_layer(), 2, enable_nested_tensor=False)
    return net, lambda b: torch.randn(b, 16, WIDTH)


def fresh_encoder() -> tuple[nn.Module, Any]:
    """The same encoder with each layer built on its own."""
    net = nn.TransformerEncoder(_layer(), 2, enable_nested_tensor=False)
    net.layers = nn.ModuleList([_layer(), _layer()])
    return net, lambda b: torch.randn(b, 16, WIDTH)


def accumulating_step(model: nn.Module, batch: Any, optimizer: torch.optim.Optimizer | None) -> None:
    """Two micro-batches' gradients accumulated before one optimizer step."""
    args, kwargs = batch
    for _ in range(2):
        model(*args, **kwargs).mean().backward()
    assert optimizer is not None
    optimizer.step()
    optimizer.zero_grad()


class _Body(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(100, 16)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.wte(ids))
        for block in self.h:
            x = block(x)
        return x


class _TiedLM(nn.Module):
    """GPT-2's layout in small: its blocks in a ``ModuleList`` the forward pass never calls, after a dropout, and
    the output layer's weight the token embedding's."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = _Body()
        self.lm_head = nn.Linear(16, 100, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.transformer(ids))


def tied_lm() -> tuple[nn.Module, Any]:
    return _TiedLM(), lambda b: torch.zeros(b, 8, dtype=torch.long)
