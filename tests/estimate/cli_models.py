"""Model factories the ``gputop estimate`` command tests name on its command line, the broken ones included."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

import torch
from torch import nn


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def deep() -> tuple[nn.Module, object]:
    blocks = [nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128)) for _ in range(6)]
    return nn.Sequential(*blocks), lambda b: torch.randn(b, 128)


def raises() -> nn.Module:
    raise ValueError("no weights file at /models/net.pt")


def not_a_model() -> str:
    return "a model"


class Selective(nn.Module):
    """Keeps only the positive inputs: a shape known only from the data."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x[x > 0].reshape(-1, 8))


def data_dependent() -> nn.Module:
    return Selective()


@torch.library.custom_op("gputop_tests::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class Extension(nn.Module):
    """Calls an operator registered without a fake kernel, as a custom CUDA extension does."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale(self.linear(x))


def extension() -> nn.Module:
    return Extension()


def gated() -> tuple[nn.Module, object]:
    """``mlp`` whose batches of 2 or more wait for the file ``GPUTOP_TEST_GATE`` names (five minutes at most): the
    search for the largest batch holds still at its first try until the test lets it go on."""
    gate = Path(os.environ["GPUTOP_TEST_GATE"])

    def batch(size: int) -> torch.Tensor:
        deadline = time.monotonic() + 300
        while size >= 2 and not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return torch.randn(size, 64)

    return mlp(), batch


def calls_exit() -> nn.Module:
    exit()  # the builtin a script would call


def exits_7() -> nn.Module:
    sys.exit(7)


def interrupts() -> nn.Module:
    raise KeyboardInterrupt


class Cancelled(BaseException):
    """Not an Exception, as trio's and pytest's own are not."""


def cancelled() -> nn.Module:
    raise Cancelled("the run was cancelled")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def unprintable() -> nn.Module:
    raise Unprintable


class ExitsOnItsThirdCall(nn.Module):
    """Runs the two training steps, then exits in the layer table's forward pass."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 3:
            sys.exit(3)
        return self.linear(x)


def exits_in_layer_table() -> nn.Module:
    return ExitsOnItsThirdCall()


def exits_in_batch() -> tuple[nn.Module, object]:
    def batch(size: int) -> torch.Tensor:
        sys.exit(4)

    return mlp(), batch


def silences_stderr() -> nn.Module:
    sys.stderr = io.StringIO()
    raise ValueError("after setting sys.stderr aside")
