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


class Bottleneck(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(width, width, 1), nn.Conv2d(width, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bn(self.conv2(torch.relu(self.conv1(x)))))


def resnet_like() -> tuple[nn.Module, Any]:
    """ResNet's layout: a stem, then stages of different lengths of bottleneck blocks, each stage a Sequential."""
    stages = [nn.Sequential(*[Bottleneck(8) for _ in range(n)]) for n in (3, 4, 6, 3)]
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return net, lambda b: torch.randn(b, 3, 16, 16)


def vgg_like() -> nn.Module:
    """VGG's layout: single layers in one long Sequential, then a classifier Sequential holding most weights."""
    features = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()] + [
        m for _ in range(6) for m in (nn.Conv2d(8, 8, 3), nn.ReLU())
    ]
    classifier = nn.Sequential(nn.Flatten(), nn.Linear(8, 4096), nn.ReLU(), nn.Linear(4096, 10))
    return nn.Sequential(nn.Sequential(*features), classifier)


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(16, 64), nn.Linear(64, 16)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention, self.mlp = _Attention(), _Mlp()


class _Stack(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(n)])


def encoder_decoder() -> nn.Module:
    """T5's layout: an encoder and a decoder stack of blocks, each block an attention and a feed-forward part."""
    net = nn.Module()
    net.embedding = nn.Embedding(64, 16)
    net.encoder, net.decoder = _Stack(3), _Stack(3)
    return net


class _Complaining(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        raise ValueError("the batch is the wrong shape")


def complaining() -> tuple[nn.Module, Any]:
    """A model whose forward pass raises a plain Python exception after an operator has run."""
    return _Complaining(), lambda b: torch.randn(b, 8)
