"""How the training thread does its math: autocast and the float32 matmul precision.

Read in the training thread, at a DataLoader batch boundary, at most once every ``READ_INTERVAL_S``: autocast is
per thread, so only that thread can see it. At the boundary a loop that enters autocast only around its forward
reads false, which is why autocast is also read inside the outermost forward of the steps whose forward is timed
(``phase_hooks``): the usual ``with torch.autocast(...): loss = model(x)`` shows there. A loop run wholly inside
autocast reads true at both. The global optimizer step hook
(``register_optimizer_step_post_hook``, torch 2.0 and later) is registered when the probe patches the DataLoader
module (``import torch`` imports ``torch.optim`` first), and again at this read where it could not be then; the hook
feeds ``tensors.TensorReader``, which also finds the parameters' dtypes.
"""

from __future__ import annotations

import sys
from typing import Any

READ_INTERVAL_S = 5.0
HOOKED_ATTR = "_gputop_probe_hooked"
"""Set on ``torch.optim.optimizer`` with the one step hook of the process; a forked child keeps its parent's, which
reads whatever reader the probe holds."""


class PrecisionReader:
    """What the last reads saw; ``report()`` is what the writer puts in the report."""

    def __init__(self) -> None:
        self.autocast: bool | None = None
        self.forward_autocast: bool | None = None
        self.matmul_precision: str | None = None
        self.due = 0.0

    def read(self, now: float, hook: Any, pre_hook: Any = None) -> None:
        """In the training thread: autocast and the matmul precision, and the optimizer hook once it can be."""
        if now < self.due:
            return
        self.due = now + READ_INTERVAL_S
        torch = sys.modules.get("torch")
        if torch is None:
            return
        self.autocast = _autocast_enabled(torch)
        self.matmul_precision = str(torch.get_float32_matmul_precision())[:16]
        hook_optimizers(hook, pre_hook)

    def in_forward(self) -> None:
        """In the training thread, inside the outermost module call of a timed forward."""
        torch = sys.modules.get("torch")
        if torch is not None:
            self.forward_autocast = _autocast_enabled(torch)

    def report(self) -> dict[str, Any]:
        seen = (self.autocast, self.forward_autocast)
        return {
            "autocast": True if True in seen else None if seen == (None, None) else False,
            "float32_matmul_precision": self.matmul_precision,
        }


def _autocast_enabled(torch: Any) -> bool:
    try:
        return bool(torch.is_autocast_enabled("cuda"))
    except TypeError:  # torch before 2.4 takes no device type
        return bool(torch.is_autocast_enabled())


def hook_optimizers(hook: Any, pre_hook: Any = None) -> None:
    """Register ``hook`` as torch's global optimizer step post hook, and ``pre_hook`` as its pre hook, if
    ``torch.optim`` is imported: once per process, whichever copy of the probe comes first (``gputop run``'s, or the
    job's own ``install()``)."""
    optimizer = sys.modules.get("torch.optim.optimizer")
    register = getattr(optimizer, "register_optimizer_step_post_hook", None)
    if register is None or getattr(optimizer, HOOKED_ATTR, False):
        return
    register(hook)
    register_pre = getattr(optimizer, "register_optimizer_step_pre_hook", None)
    if pre_hook is not None and register_pre is not None:
        register_pre(pre_hook)
    setattr(optimizer, HOOKED_ATTR, True)
