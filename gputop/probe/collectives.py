"""Waits in ``torch.distributed``'s collectives: each function wrapped, timed as the ``collective`` phase.

Wrapped in ``torch.distributed`` and ``torch.distributed.distributed_c10d`` at the probe's first step boundary
(the job calls them as ``dist.all_reduce``: a name imported earlier with ``from torch.distributed import
all_reduce`` keeps torch's own). A collective inside another phase (an all-gather in the forward pass) is taken
out of that phase. On the host a blocking collective's time is its wait for the slowest rank plus the transfer; one
called with ``async_op=True`` only launches, and its ``wait()`` is not seen. On CUDA the phase's events measure the
collective's kernels on the GPU's stream, which wait for the other ranks there. DDP's gradient all-reduce is not
called through these functions: see ``phase_hooks``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .phase_hooks import PATCHED_ATTR, wrap_phase
from .phases import COLLECTIVE
from .steps import StepTracker

NAMES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
)
MODULES = ("torch.distributed.distributed_c10d", "torch.distributed")


def wrap_collectives(tracker: StepTracker, failed: Callable[[str, BaseException], None], is_compiling: Any) -> bool:
    """Wrap the collectives of an imported ``torch.distributed``; False where it is not (yet) there."""
    modules = [sys.modules.get(name) for name in MODULES]
    if modules[0] is None:
        return False
    wrapped: dict[int, Any] = {}
    for module in modules:
        for name in NAMES:
            original = getattr(module, name, None)
            if original is None or getattr(original, PATCHED_ATTR, False):
                continue
            if id(original) not in wrapped:
                wrapped[id(original)] = wrap_phase(original, COLLECTIVE, tracker, failed, is_compiling)
            setattr(module, name, wrapped[id(original)])
    return True
