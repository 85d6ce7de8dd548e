"""Training sharded over N GPUs, as rank 0 of N sees it, in one process: torch's fake process group (the ``fake``
backend, whose collectives return at once and move nothing) stands in for the other ranks.

``fsdp`` / ``zero3`` and ``zero2`` run PyTorch's own FSDP2 (``fully_shard``) on the fake group, on each of the
model's repeated blocks and then the model: the weights, gradients and optimizer state are 1/N shards (DTensors),
and each block's weights are all-gathered into full ones for its forward and backward pass (``zero3`` frees them
after the forward, ``zero2`` keeps them to the backward: ``reshard_after_forward=False``, ZeRO-2's trade).

``ddp`` and ``zero1`` cannot run so: DistributedDataParallel's C++ reducer reads its tensors' data, which fake
tensors do not have. They are run as single-GPU steps with what DDP adds: its gradient buckets, one flat buffer as
large as the gradients (``gradient_as_bucket_view=False``, the default, keeps ``.grad`` apart from them), allocated
when DDP wraps the model. ``zero1`` (``ZeroRedundancyOptimizer`` over DDP) builds the optimizer over the largest
rank's share of the parameters alone, partitioned as ``ZeroRedundancyOptimizer`` does (largest first, each to the
rank holding the fewest bytes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from gputop.estimate.defaults import Shard
from gputop.estimate.errors import EstimateError
from gputop.estimate.tracker import MemoryTracker

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

FULLY_SHARDED: tuple[Shard, ...] = ("fsdp", "zero2", "zero3")


def fake_group(gpus: int) -> tuple[DeviceMesh, bool]:
    """A device mesh of ``gpus`` CPU ranks over torch's fake process group, this process rank 0 (made outside the
    fake mode: the mesh reads its ranks from real tensors), and whether the group was made here (then
    ``release_group`` ends it). ``EstimateError`` where the process has a real group."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    made = False
    if dist.is_initialized():
        if dist.get_backend() != "fake":
            raise EstimateError("a sharded estimate needs a process without torch.distributed already initialised")
        if dist.get_world_size() != gpus:
            dist.destroy_process_group()
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=gpus)
        made = True
    return init_device_mesh("cpu", (gpus,)), made


def release_group() -> None:
    """End the fake process group ``fake_group`` made, so that the process the estimate ran in (a notebook, a
    launcher script) can start its own ``torch.distributed`` afterwards."""
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_backend() == "fake":
        dist.destroy_process_group()


def units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules ``fully_shard`` wraps one by one before the model: its repeated blocks, as activation
    checkpointing finds them (``checkpointing.repeated_blocks``), or else the elements of the first
    ``nn.ModuleList`` or ``nn.Sequential`` (breadth first) that holds two or more."""
    from gputop.estimate.checkpointing import repeated_blocks

    found = repeated_blocks(model)
    queue = [model]
    while queue and not found:
        module = queue.pop(0)
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and len(module) >= 2:
            found = list(module)
        queue.extend(module.children())
    return found


def shard_model(model: torch.nn.Module, blocks: list[torch.nn.Module], shard: Shard, mesh: DeviceMesh) -> None:
    """``fully_shard`` each of ``blocks`` and then ``model`` over ``mesh`` (call under the fake mode)."""
    from torch.distributed.fsdp import fully_shard

    keep = shard == "zero2"
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=not keep)
    fully_shard(model, mesh=mesh, reshard_after_forward=not keep)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """The part of ``tensor`` this rank holds: a DTensor's local shard, any other tensor itself."""
    from torch.distributed.tensor import DTensor

    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def ddp_buckets(model: torch.nn.Module) -> torch.Tensor | None:
    """DDP's gradient buckets: one buffer of the trainable parameters' bytes (call under the fake mode)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        return None
    return torch.empty(sum(p.numel() * p.element_size() for p in trainable), dtype=torch.uint8)


def zero1_optimizer(name: str, args: dict[str, object], model: torch.nn.Module, gpus: int) -> torch.optim.Optimizer:
    """The optimizer of the rank ``ZeroRedundancyOptimizer`` gives the most bytes, over its share alone."""
    from gputop.estimate.training import make_optimizer

    share = torch.nn.Module()
    share.held = torch.nn.ParameterList(largest_share([p for p in model.parameters() if p.requires_grad], gpus))
    return make_optimizer(name, args, share)


def largest_share(parameters: list[torch.nn.Parameter], gpus: int) -> list[torch.nn.Parameter]:
    """The parameters of the rank ``ZeroRedundancyOptimizer`` gives the most bytes: largest first, each to the rank
    that holds the fewest so far."""
    shares: list[list[torch.nn.Parameter]] = [[] for _ in range(gpus)]
    sizes = [0] * gpus
    for p in sorted(parameters, key=lambda p: p.numel(), reverse=True):
        rank = sizes.index(min(sizes))
        shares[rank].append(p)
        sizes[rank] += p.numel() * p.element_size()
    return shares[sizes.index(max(sizes))]


@contextlib.contextmanager
def storage_resizes(tracker: MemoryTracker) -> Iterator[None]:
    """FSDP's frees and allocations of its all-gathered weights told to ``tracker``: FSDP resizes their storages in
    place (to 0 after a block's pass, back before the next), which no operator shows."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    def told(resize: Callable[[torch.Tensor], None], full: bool) -> Any:
        def resized(tensor: torch.Tensor) -> None:
            resize(tensor)
            tracker.resize(tensor, tensor.numel() * tensor.itemsize if full else 0)

        return resized

    saved = [
        (m, n, getattr(m, n))
        for m in (_fsdp_param, _fsdp_param_group)
        for n in ("alloc_storage", "free_storage")
        if hasattr(m, n)
    ]
    for module, name, resize in saved:
        setattr(module, name, told(resize, name == "alloc_storage"))
    try:
        yield
    finally:
        for module, name, resize in saved:
            setattr(module, name, resize)
