"""Activation checkpointing of a model's repeated blocks: which modules are wrapped, and saying which.

The blocks people mean are the model's repeated units (ResNet's ``Bottleneck``\\ s, a transformer's layers,
ConvNeXt's blocks), wherever the model keeps them: in one list, in several stages, in an encoder and a decoder.
They are found by class: among the classes of modules that hold other modules (containers aside) and occur
twice or more, those whose instances hold at least half of the model's parameters, and of these the one with the
most instances (then the most parameters). A block's attention or feed-forward part occurs as often as the block
but holds less of the model; a stage or an encoder holds as much but occurs less often. A model without such a
class has the elements of its longest ``Sequential`` checkpointed when they are blocks themselves, else (VGG's
single layers) that ``Sequential`` in about √n segments (``torch.utils.checkpoint.checkpoint_sequential``): a
single layer checkpointed saves nothing, since the checkpoint keeps its input, which is what the layer saves.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from gputop.estimate.errors import EstimateError

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)


def checkpoint_model(model: torch.nn.Module, block_class: str | None = None) -> str:
    """Wrap the model's blocks (those of class ``block_class`` when given) in non-reentrant checkpoints; what
    was wrapped, in a few words (``16 Bottleneck blocks``). ``EstimateError`` when nothing can be wrapped."""
    if block_class is not None:
        found = _outermost([m for m in model.modules() if type(m).__name__ == block_class and m is not model])
        if not found:
            known = ", ".join(sorted(_repeated(model))) or "none"
            raise EstimateError(f"no module of class {block_class} to checkpoint (repeated classes: {known})")
        return _wrap(found)
    chosen = repeated_blocks(model)
    if chosen:
        return _wrap(chosen)
    sequences = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Sequential) and len(m) > 1]
    if not sequences:
        raise EstimateError("no repeated blocks to checkpoint: name their class with --checkpoint-class")
    name, longest = max(sequences, key=lambda item: len(item[1]))
    if all(next(element.children(), None) is not None for element in longest):
        return _wrap(list(longest))  # a Sequential of blocks built as Sequentials
    segments = max(2, round(math.sqrt(len(longest))))
    longest.forward = functools.partial(_run_in_segments, longest, segments)  # type: ignore[method-assign]
    return f"{name or 'the model'} (Sequential of {len(longest)}) in {segments} segments"


def repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The instances of the class of repeated blocks (see the module's text); none when no class qualifies."""
    total = sum(p.numel() for p in model.parameters()) or 1
    best: tuple[int, int] | None = None
    chosen: list[torch.nn.Module] = []
    for instances in _repeated(model).values():
        held = sum(p.numel() for p in {p for m in instances for p in m.parameters()})
        if 2 * held < total:
            continue
        if best is None or (len(instances), held) > best:
            best, chosen = (len(instances), held), instances
    return chosen


def _repeated(model: torch.nn.Module) -> dict[str, list[torch.nn.Module]]:
    """The classes of modules that hold modules (containers aside) and occur twice or more, the outermost
    instances of each."""
    by_class: dict[str, list[torch.nn.Module]] = defaultdict(list)
    for module in model.modules():
        if module is not model and not isinstance(module, _CONTAINERS) and next(module.children(), None) is not None:
            by_class[type(module).__name__].append(module)
    outermost = {name: _outermost(instances) for name, instances in by_class.items()}
    return {name: instances for name, instances in outermost.items() if len(instances) >= 2}


def _outermost(modules: list[torch.nn.Module]) -> list[torch.nn.Module]:
    """``modules`` less those inside another of them (a block nested in a block of its own class)."""
    inner = {id(sub) for m in modules for sub in m.modules() if sub is not m}
    return [m for m in modules if id(m) not in inner]


def _wrap(blocks: list[torch.nn.Module]) -> str:
    for block in blocks:
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)
    return f"{len(blocks)} {type(blocks[0]).__name__} blocks"


def _run_in_segments(sequence: torch.nn.Sequential, segments: int, input: torch.Tensor) -> torch.Tensor:
    return checkpoint_sequential(sequence, segments, input, use_reentrant=False)
