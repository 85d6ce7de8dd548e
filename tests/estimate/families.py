"""Six model families built from ``torch.nn`` only, small enough to train for real on a CPU in a test: each is a
factory returning the model and a function that makes a batch, as ``gputop estimate`` takes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Factory = Callable[[], tuple[nn.Module, Callable[[int], Any]]]


def mlp() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    model = nn.Sequential(
        nn.Linear(256, 512), nn.GELU(), nn.Dropout(0.1), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    return model, lambda b: torch.randn(b, 256)


def cnn() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    return model, lambda b: torch.randn(b, 3, 32, 32)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def transformer() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return Encoder(), lambda b: torch.randn(b, 32, 64)


class Recurrent(nn.Module):
    def __init__(self, cell: type[nn.RNNBase]) -> None:
        super().__init__()
        self.rnn = cell(32, 64, num_layers=2, batch_first=True)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def gru() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return Recurrent(nn.GRU), lambda b: torch.randn(b, 20, 32)


def lstm() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    """Not among the six: on the CPU, ``nn.LSTM`` runs oneDNN, whose workspace FakeTensorMode sizes as empty."""
    return Recurrent(nn.LSTM), lambda b: torch.randn(b, 20, 32)


class Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(20_000, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(tokens).mean(dim=1))


def embedding() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return Bag(), lambda b: torch.randint(0, 20_000, (b, 16))


def _double_conv(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """An encoder-decoder whose decoder takes the encoder's features through skip connections."""

    def __init__(self) -> None:
        super().__init__()
        self.down1 = _double_conv(3, 8)
        self.down2 = _double_conv(8, 16)
        self.bottom = _double_conv(16, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec2 = _double_conv(32, 16)
        self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec1 = _double_conv(16, 8)
        self.out = nn.Conv2d(8, 1, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(self.pool(d1))
        bottom = self.bottom(self.pool(d2))
        u2 = self.dec2(torch.cat([self.up2(bottom), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.out(u1)


def unet() -> tuple[nn.Module, Callable[[int], torch.Tensor]]:
    return UNet(), lambda b: torch.randn(b, 3, 32, 32)


FAMILIES: dict[str, tuple[Factory, tuple[int, int, int]]] = {
    "MLP": (mlp, (8, 64, 512)),
    "CNN": (cnn, (4, 16, 64)),
    "transformer encoder": (transformer, (4, 16, 64)),
    "GRU": (gru, (4, 16, 64)),
    "embedding bag": (embedding, (8, 64, 512)),
    "U-Net (skip connections)": (unet, (2, 8, 32)),
}
"""Each family's factory and the three batch sizes it is measured at."""
