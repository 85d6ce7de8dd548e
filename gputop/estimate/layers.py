"""The layer table: for each module in the order the forward pass first calls it, the parameters it holds and the
activation bytes it saves for the backward pass, from one training forward pass under the tracker."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from gputop.estimate import training
from gputop.estimate.errors import users_code
from gputop.estimate.parts import LayerRow
from gputop.estimate.session import Session
from gputop.estimate.tracker import MemoryTracker


def layer_table(session: Session, batch_size: int) -> tuple[LayerRow, ...]:
    """One row per module the forward pass at ``batch_size`` called, in the order it first called them."""
    model = session.model
    names = {module: name for name, module in model.named_modules()}
    tracker = MemoryTracker()
    order: list[torch.nn.Module] = []
    running: list[torch.nn.Module] = []
    saved: dict[torch.nn.Module, set[int]] = {}
    inputs: dict[torch.nn.Module, set[int]] = {}

    def enter(module: torch.nn.Module, args: Any) -> None:
        if module not in saved:
            order.append(module)
            saved[module] = set()
            inputs[module] = tracker.live_serials(t for t in tree_leaves(args) if isinstance(t, torch.Tensor))
        running.append(module)

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        running.pop()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        serials = tracker.live_serials([tensor]) - weights
        for module in running:
            saved[module] |= serials
        return tensor

    handles = [h for m in names for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    failed = f"the layer table's forward pass failed at {{}} (batch size {batch_size}): "
    try:
        with users_code(lambda: failed.format(tracker.operator or "its start")), session.fake_mode, tracker:
            tracker.add([*model.parameters(), *model.buffers()], "weights")
            weights = tracker.live_serials([*model.parameters(), *model.buffers()])
            args, kwargs = session.batch(batch_size)
            with (
                torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor),
                training.autocast(session.settings.precision, session.device_type),
            ):
                model(*args, **kwargs)
            return tuple(_row(m, names[m], saved[m], inputs[m], tracker) for m in order)
    finally:
        for handle in handles:
            handle.remove()


def _row(module: torch.nn.Module, name: str, saved: set[int], inputs: set[int], tracker: MemoryTracker) -> LayerRow:
    own = list(module.parameters(recurse=False))
    saved_bytes = tracker.sum_parts(saved).sum()
    has_children = next(module.children(), None) is not None
    return LayerRow(
        name=name,
        kind=type(module).__name__,
        depth=0 if not name else name.count(".") + 1,
        parameters=sum(p.numel() for p in own),
        parameter_bytes=sum(p.numel() * p.element_size() for p in own),
        saved_bytes=saved_bytes,
        checkpoint_saves_bytes=max(0, saved_bytes - tracker.sum_parts(inputs).sum()) if has_children else None,
    )
