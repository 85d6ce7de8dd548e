"""Where the job's tensors hold memory: weights, gradients and optimizer state, per device, found through the
optimizers the job steps.

torch's global optimizer step hook (registered by ``precision.py``) hands every stepped optimizer to
``TensorReader.stepped``. Most calls only look the optimizer up in a weak set and read the clock; at most once
every ``READ_INTERVAL_S``, and when an optimizer steps for the first time, the reader walks the parameters of
every optimizer it has seen, right after a step, when the gradients of that step exist and the optimizer state is
complete. Parameters shared by two
optimizers, or listed twice, are counted once; so are state tensors shared between parameters. On a CUDA device it
also reads ``torch.cuda.memory_allocated`` at that moment: what persists from one step to the next.
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Any

READ_INTERVAL_S = 5.0
MAX_DEVICES = 64
MAX_DTYPES = 8
MAX_OPTIMIZERS = 8


def _storage_key(tensor: Any) -> tuple[str, int] | None:
    """A tensor's storage, so that views of one buffer (a fused optimizer's flat state) count once."""
    try:
        return str(tensor.device), tensor.untyped_storage().data_ptr()
    except Exception:  # a tensor without storage (a meta or sparse tensor): counted by its own size
        return None


def _nbytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


class _Device:
    """Running sums of one device during a walk."""

    __slots__ = ("gradients", "optimizer", "parameters", "weight_dtypes", "weights")

    def __init__(self) -> None:
        self.parameters = 0
        self.weights = 0
        self.gradients = 0
        self.optimizer = 0
        self.weight_dtypes: dict[str, int] = {}

    def report(self, device: str, allocated: int | None) -> dict[str, Any]:
        dtypes = sorted(self.weight_dtypes.items(), key=lambda item: -item[1])[:MAX_DTYPES]
        return {
            "device": device,
            "parameters": self.parameters,
            "weights_bytes": self.weights,
            "gradients_bytes": self.gradients,
            "optimizer_bytes": self.optimizer,
            "weight_dtypes": dict(dtypes),
            "allocated_after_step_bytes": allocated,
        }


class TensorReader:
    """What the last walk found; ``report()`` is what the writer puts in the report."""

    def __init__(self) -> None:
        self._optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.due = 0.0
        self.devices: list[dict[str, Any]] | None = None
        self.optimizer_names: list[str] = []
        self.dtypes: list[str] | None = None
        self.read_at: float | None = None

    def stepped(self, optimizer: Any) -> None:
        """An optimizer has just stepped (in the training thread): walk every one seen when due, or at once when
        this one is new (a job's second optimizer steps first after the first one's walk)."""
        now = time.perf_counter()
        if optimizer not in self._optimizers:
            self._optimizers.add(optimizer)
        elif now < self.due:
            return
        self.due = now + READ_INTERVAL_S
        self.walk(now)

    def walk(self, now: float) -> None:
        optimizers = list(self._optimizers)[:MAX_OPTIMIZERS]
        devices: dict[str, _Device] = {}
        seen_params: set[int] = set()
        seen_storage: set[tuple[str, int]] = set()

        def first_time(tensor: Any) -> bool:
            key = _storage_key(tensor)
            if key is None:
                return True
            if key in seen_storage:
                return False
            seen_storage.add(key)
            return True

        for optimizer in optimizers:
            state = optimizer.state
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if id(param) in seen_params:
                        continue
                    seen_params.add(id(param))
                    sums = devices.setdefault(str(param.device), _Device())
                    sums.parameters += int(param.numel())
                    if first_time(param):
                        size = _nbytes(param)
                        sums.weights += size
                        dtype = str(param.dtype).removeprefix("torch.")[:24]
                        sums.weight_dtypes[dtype] = sums.weight_dtypes.get(dtype, 0) + size
                    grad = param.grad
                    if grad is not None and first_time(grad):
                        sums.gradients += _nbytes(grad)
                    for value in state.get(param, {}).values():
                        if hasattr(value, "untyped_storage") and first_time(value):
                            devices.setdefault(str(value.device), _Device()).optimizer += _nbytes(value)
        self.devices = [
            sums.report(device, _allocated(device)) for device, sums in sorted(devices.items())[:MAX_DEVICES]
        ]
        self.optimizer_names = sorted({type(o).__name__[:40] for o in optimizers})
        self.dtypes = sorted({d for sums in devices.values() for d in sums.weight_dtypes})[:MAX_DTYPES]
        self.read_at = now

    def report(self, now: float) -> dict[str, Any]:
        return {
            "tensors": None
            if self.devices is None
            else {
                "devices": self.devices,
                "optimizers": self.optimizer_names,
                "age_s": None if self.read_at is None else max(0.0, now - self.read_at),
            }
        }


def _allocated(device: str) -> int | None:
    """``torch.cuda.memory_allocated`` of a CUDA device, None elsewhere: the CPU has no allocator statistics."""
    if not device.startswith("cuda"):
        return None
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None
    return int(cuda.memory_allocated(device))
