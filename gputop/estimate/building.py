"""Building the user's model under ``FakeTensorMode`` as its factory is written.

Two things a factory does that fake tensors alone do not survive:

- **Python numbers computed from tensors while it builds**: timm's ``torch.linspace(0, drop_path_rate,
  depth).tolist()`` for the drop-path schedule, a position table's ``.item()``. A fake tensor has no values, so
  its ``.tolist()`` raises ``DataDependentOutputException``. While the factory runs, a small tensor (at most
  ``REAL_ELEMENTS``) made from real tensors alone (a ``linspace``, an ``arange``, a ``tensor([...])``) is made
  for real, so its values exist; parameters and anything larger stay fake, costing nothing.
- **``copy.deepcopy`` of fake modules** (``nn.TransformerEncoder`` copies its layer N times): the copies' tensors
  belong to another fake mode, which the estimate's mode converts anew at every use, so each view of such a
  weight (``weight.t()`` in every linear layer) looked like a new weight-sized tensor.

After the factory, every parameter and buffer that is not a fake tensor of the estimate's mode (a small real one,
a deep copy's) is replaced by one of the same shape, strides and dtype that is, tied tensors staying tied.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves

REAL_ELEMENTS = 1 << 16
"""The largest tensor made for real while a factory builds: a schedule or a table of a few thousand numbers, never
a weight worth faking (256 KiB in float32)."""


class _SmallTensorsReal(TorchDispatchMode):
    """Pushed inside the fake mode: an operator whose tensor inputs are all real gives a real result when that is
    small (its size is learnt from the fake mode first, so nothing large is ever made)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if any(isinstance(t, FakeTensor) for t in inputs):
            return func(*args, **kwargs)
        try:
            fake = func(*args, **kwargs)  # the fake mode, outside this one, answers first
        except Exception:  # a value read (.item(), .tolist()): fine from a small real tensor
            if not inputs or _elements(inputs) > REAL_ELEMENTS:
                raise
        else:
            outputs = [t for t in tree_leaves(fake) if isinstance(t, torch.Tensor)]
            if not outputs or _elements(outputs) > REAL_ELEMENTS:
                return fake
        with _disable_current_modes():
            return func(*args, **kwargs)


def _elements(tensors: list[torch.Tensor]) -> int:
    return sum(math.prod(t.shape) for t in tensors)


def build(factory: Callable[[], Any], fake_mode: FakeTensorMode) -> Any:
    """What ``factory()`` returns, built under ``fake_mode`` with small tensors made for real."""
    with fake_mode, _SmallTensorsReal():
        return factory()


def adopt(model: torch.nn.Module, fake_mode: FakeTensorMode) -> None:
    """Every parameter and buffer of ``model`` a fake tensor of ``fake_mode`` (call under it)."""
    replace_tensors(model, lambda t: t if getattr(t, "fake_mode", None) is fake_mode else _fake_like(t))


def _fake_like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=tensor.device)


def replace_tensors(model: torch.nn.Module, new: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Each parameter and buffer of ``model`` replaced by ``new(tensor)`` (a parameter stays a parameter with its
    ``requires_grad``; a tensor held in several places, as tied weights are, is replaced once and stays shared).

    Done by hand: ``Module.to`` swaps a fake parameter's contents in place, which fails once anything holds a
    weak reference to it, as ``FakeTensorMode``'s caches may.
    """
    converted: dict[int, torch.Tensor] = {}

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in converted:
            made = new(tensor)
            if isinstance(tensor, torch.nn.Parameter) and made is not tensor:
                made = torch.nn.Parameter(made, requires_grad=tensor.requires_grad)
            converted[id(tensor)] = made
        return converted[id(tensor)]

    for module in model.modules():
        for key, parameter in module._parameters.items():
            if parameter is not None:
                module._parameters[key] = cast(torch.nn.Parameter, convert(parameter))
        for key, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[key] = convert(buffer)
