"""FLOPs of one training step, counted once on a live step by torch's own counter.

``torch.utils.flop_counter.FlopCounterMode`` is entered at a step boundary and left at the next, on the first
step after ``COUNT_AT_STEP`` (past the warm-up, so that the step is a steady one): the forward and backward
passes' matrix products and convolutions are counted, as torch counts them; the optimizer's element-wise updates
are not (a few FLOPs per parameter, well under 1 % of a step's). The counted step runs slower (the counter sees
every operation in Python): about 10 times as long for a small CPU model (24 ms against 2.3 ms,
``benchmarks/probe_overhead.py``), once in the job's life, and left out of the statistics. A model
compiled with ``torch.compile`` is not counted: running it under the counter would make dynamo compile it again.
Nor is a job that has not imported ``torch._dynamo``: any dispatch mode imports it at its first operation, which
takes 1 to 3 s of the training thread; every job that steps a ``torch.optim`` optimizer has imported it already
(its ``step`` is wrapped to keep dynamo out), so in practice that is a loop without an optimizer.
"""

from __future__ import annotations

import sys
from typing import Any

from .steps import NEVER, compile_in_use

COUNT_AT_STEP = 8


def step_counter() -> Any:
    """The counter of a step's FLOPs, entered for one step: the definition of FLOPs per step that the live MFU and
    ``gputop estimate``'s time per step share (the forward and backward passes' matrix products and convolutions,
    as torch counts them). The CPU's fused attention kernel, which torch's counter does not know, is counted as
    CUDA's flash kernel is: the same products."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    aten = torch.ops.aten
    same = {
        aten._scaled_dot_product_flash_attention_for_cpu: aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: aten._scaled_dot_product_flash_attention_backward,
    }
    return FlopCounterMode(
        display=False, custom_mapping={op: _as_counted(flop_registry[like]) for op, like in same.items()}
    )


def _as_counted(formula: Any) -> Any:
    """A formula from torch's registry, which takes the operator's tensors (it reads their shapes itself)."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        return formula(*args, **kwargs)

    counted._get_raw = True  # type: ignore[attr-defined]
    return counted


def counted_flops(mode: Any) -> int:
    """What a ``step_counter()`` counted, once left."""
    return int(mode.get_total_flops())


class FlopCount:
    """One count per process; ``report()`` gives the report's ``flops_per_step`` and ``flops_source``."""

    def __init__(self, failed: Any) -> None:
        self.failed = failed
        self.flops: int | None = None
        self.reason = "not counted yet: counted once, on a step after the warm-up"
        self.done = False
        self.mode: Any = None

    @property
    def next_due(self) -> int:
        return NEVER if self.done else COUNT_AT_STEP

    def due(self, steps: int) -> bool:
        return not self.done and steps >= COUNT_AT_STEP

    def begin(self) -> None:
        self.done = True
        try:
            if compile_in_use():
                self.reason = "torch.compile in use: counting FLOPs would make it compile the model again"
                return
            if "torch._dynamo" not in sys.modules:
                self.reason = "not counted: the FLOP counter would first import torch._dynamo, seconds of the loop"
                return
            mode = step_counter()
            mode.__enter__()
            self.mode = mode
        except Exception as exc:
            self.reason = f"FLOP counter unavailable: {type(exc).__name__}"[:200]
            self.failed("flop counter", exc)

    def end(self) -> None:
        mode, self.mode = self.mode, None
        if mode is None:
            return
        try:
            mode.__exit__(None, None, None)
            self.flops = counted_flops(mode)
        except Exception as exc:
            self.reason = f"FLOP counter failed: {type(exc).__name__}"[:200]
            self.failed("flop counter", exc)

    def report(self) -> dict[str, Any]:
        if self.flops is None:
            return {"flops_per_step": None, "flops_source": None, "unavailable": {"flops_per_step": self.reason}}
        return {"flops_per_step": float(self.flops), "flops_source": "counted", "unavailable": {}}
