"""Host-to-device copies: ``Tensor.to``, ``Tensor.cuda`` and ``Tensor.copy_`` wrapped once CUDA is initialised.

Only a copy from a host tensor to a CUDA device is timed (the ``h2d`` phase, on sampled steps), with its bytes,
whether its source was pinned (``is_pinned()``) and whether it was asked with ``non_blocking=True``. A process that
never initialises CUDA never has these wrapped, and pays nothing for them. Every other call (a dtype change, a
copy on the host, a tensor already on the GPU) goes straight to torch's method after one attribute test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .phase_hooks import PATCHED_ATTR
from .phases import H2D
from .steps import StepTracker

Failed = Callable[[str, BaseException], None]


def to_cuda(args: tuple[Any, ...], kwargs: dict[str, Any], tensor_type: Any) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` targets a CUDA device: ``"cuda"``, ``"cuda:1"``, a
    ``torch.device``, a device index, or another tensor on CUDA."""
    device = kwargs.get("device")
    if device is None and args:
        first = args[0]
        if isinstance(first, tensor_type):
            return bool(first.is_cuda)
        if isinstance(first, int) and not isinstance(first, bool):
            return True
        device = first
    if device is None or isinstance(device, bool):
        return False
    if isinstance(device, int):
        return True
    return str(device).startswith("cuda")


def non_blocking_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``non_blocking`` as passed: by name, or as the first bool among the positional arguments."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return next((arg for arg in args if isinstance(arg, bool)), False)


def wrap_copies(torch: Any, tracker: StepTracker, failed: Failed, is_compiling: Callable[[], bool]) -> None:
    tensor = torch.Tensor
    if getattr(tensor.to, PATCHED_ATTR, False):
        return
    original_to, original_cuda, original_copy = tensor.to, tensor.cuda, tensor.copy_

    def timed(call: Callable[[], Any], source: Any, non_blocking: bool) -> Any:
        entered = False
        try:
            tracker.enter(H2D)
            entered = True
        except Exception as exc:
            failed("h2d", exc)
        try:
            return call()
        finally:
            if entered:
                try:
                    tracker.leave()
                    size = int(source.numel()) * int(source.element_size())
                    tracker.copied_to_device(size, bool(source.is_pinned()), non_blocking)
                except Exception as exc:
                    failed("h2d", exc)

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracker.sampled or self.is_cuda or is_compiling() or not to_cuda(args, kwargs, tensor):
            return original_to(self, *args, **kwargs)
        return timed(lambda: original_to(self, *args, **kwargs), self, non_blocking_of(args, kwargs))

    def cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracker.sampled or self.is_cuda or is_compiling():
            return original_cuda(self, *args, **kwargs)
        return timed(lambda: original_cuda(self, *args, **kwargs), self, non_blocking_of(args, kwargs))

    def copy_(self: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracker.sampled or not self.is_cuda or is_compiling() or getattr(src, "is_cuda", True):
            return original_copy(self, src, *args, **kwargs)
        return timed(lambda: original_copy(self, src, *args, **kwargs), src, non_blocking_of(args, kwargs))

    for name, wrapper, original in (
        ("to", to, original_to),
        ("cuda", cuda, original_cuda),
        ("copy_", copy_, original_copy),
    ):
        wrapper.__name__ = name
        wrapper.__doc__ = original.__doc__
        setattr(wrapper, PATCHED_ATTR, True)
        setattr(tensor, name, wrapper)
