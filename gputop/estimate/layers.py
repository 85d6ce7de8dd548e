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
        with users_code(lambda exc: failed.format(tracker.failed_at(exc))), session.fake_mode, tracker:
            tracker.add([*model.parameters(), *model.buffers()], "weights")
            weights = tracker.live_serials([*model.parameters(), *model.buffers()])
            args, kwargs = session.batch(batch_size)
            with (
                torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor),
                training.autocast(session.settings.precision, session.device_type),
            ):
                model(*args, **kwargs)
            shown: set[torch.nn.Parameter] = set()  # a tied weight (GPT-2's lm_head) in its first row only
            return tuple(
                _row(m, names[m], saved[m], inputs.get(m), tracker, shown) for m in _with_parents(order, names, saved)
            )
    finally:
        for handle in handles:
            handle.remove()


def _with_parents(
    order: list[torch.nn.Module], names: dict[torch.nn.Module, str], saved: dict[torch.nn.Module, set[int]]
) -> list[torch.nn.Module]:
    """``order`` with each module's parents that the forward pass never called (a ``ModuleList`` of blocks) in
    front of their first child, saving what their children saved: a row is never indented under a stranger."""
    by_name = {name: module for module, name in names.items()}
    rows: list[torch.nn.Module] = []
    placed: set[torch.nn.Module] = set()
    for module in order:
        parts = names[module].split(".") if names[module] else []
        for depth in range(1, len(parts)):
            parent = by_name[".".join(parts[:depth])]
            if parent not in placed and parent not in saved:
                prefix = names[parent] + "."
                saved[parent] = set().union(*(saved[m] for m in order if names[m].startswith(prefix)))
                rows.append(parent)
                placed.add(parent)
        rows.append(module)
        placed.add(module)
    return rows


def _row(
    module: torch.nn.Module,
    name: str,
    saved: set[int],
    inputs: set[int] | None,
    tracker: MemoryTracker,
    shown: set[torch.nn.Parameter],
) -> LayerRow:
    own = [p for p in module.parameters(recurse=False) if p not in shown]
    shown.update(own)
    saved_bytes = tracker.sum_parts(saved).sum()
    has_children = next(module.children(), None) is not None and inputs is not None
    return LayerRow(
        name=name,
        kind=type(module).__name__,
        depth=0 if not name else name.count(".") + 1,
        parameters=sum(p.numel() for p in own),
        parameter_bytes=sum(p.numel() * p.element_size() for p in own),
        saved_bytes=saved_bytes,
        checkpoint_saves_bytes=max(0, saved_bytes - tracker.sum_parts(inputs or ()).sum()) if has_children else None,
    )
