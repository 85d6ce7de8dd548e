"""Every tensor storage a step creates, by part, with the moment the live bytes peaked: a dispatch mode that sees
each operator's outputs under ``FakeTensorMode``, where tensors have sizes but no memory.

A storage is counted once however many views share it, from the operator that created it until PyTorch frees it
(a weak-reference finalizer on the storage fires then: the storage's Python object lives as long as its C++
storage does). Parts are claimed later by what the step does with a storage (``claim``): parameters and buffers are
weights, what autograd accumulates into ``.grad`` gradients, what the optimizer keeps in its state optimizer state,
what the forward pass saves for the backward pass activations; the rest are temporaries.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

from gputop.estimate.allocator import Event
from gputop.estimate.errors import raised_where
from gputop.estimate.parts import PARTS, Part, Parts
from gputop.estimate.workspace import workspace_bytes


@dataclass(eq=False)
class Allocation:
    """One storage's bytes and the part it was claimed by (None: a temporary)."""

    nbytes: int
    part: Part | None = None


class MemoryTracker(TorchDispatchMode):
    """Counts live storage bytes after every operator and remembers when they peaked.

    Args:
        default_part: the part of a storage nothing claims: temporaries in training, activations in inference,
            where everything alive besides the weights is the forward pass's.
    """

    def __init__(self, default_part: Part = "temporaries") -> None:
        super().__init__()
        self.default_part: Part = default_part
        self.allocations: dict[int, Allocation] = {}
        self.events: list[Event] = []
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_event = 0
        self.operator: str | None = None
        """The operator running now, or the last one run."""
        self.running: str | None = None
        """The operator running now (None between operators): the one named when the model fails inside it."""
        self._live: dict[int, int] = {}  # storage address → allocation serial
        self._watch: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._serials = itertools.count()
        self._part_bytes = dict.fromkeys(PARTS, 0)
        self._part_most = dict.fromkeys(PARTS, 0)
        self.resized: set[int] = set()
        """The allocations a storage took by ``resize`` (FSDP's all-gathered weights)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.operator = self.running = str(func)
        scratch = workspace_bytes(func, args)
        serial = self._allocate(scratch, None) if scratch else None
        out = func(*args, **(kwargs or {}))
        self.running = None
        self.add(out)
        if serial is not None:
            self._release(serial)
        return out

    def failed_at(self, exc: BaseException) -> str:
        """Where a step that raised ``exc`` failed: the operator it raised in, else the line of the user's code
        that raised it (a plain Python exception between operators), else the last operator run."""
        return self.running or raised_where(exc) or self.operator or "its start"

    def add(self, tensors: Any, part: Part | None = None) -> None:
        """Count the storages of the tensors in ``tensors`` (any nesting) not seen yet, claimed by ``part``."""
        for tensor in tree_leaves(tensors):
            if isinstance(tensor, torch.Tensor):
                for plain in _plain(tensor):
                    self._see(plain, part)

    def claim(self, tensors: Iterable[torch.Tensor | None], part: Part) -> None:
        """Give the storages of ``tensors`` to ``part`` unless an earlier part in ``PARTS`` has them."""
        for tensor in tensors:
            if tensor is None:
                continue
            serial = self._live.get(_address(tensor))
            if serial is None:
                continue
            allocation = self.allocations[serial]
            if allocation.part is None or PARTS.index(part) < PARTS.index(allocation.part):
                self._count(allocation, -1)
                allocation.part = part
                self._count(allocation, 1)

    def _see(self, tensor: torch.Tensor, part: Part | None) -> None:
        storage = tensor.untyped_storage()
        address = storage._cdata
        serial = self._live.get(address)
        if serial is not None:
            if part is not None:
                self.claim([tensor], part)
            return
        serial = self._allocate(storage.nbytes(), part)
        self._live[address] = serial
        # A weak reference held here, not a finalizer: a tracker that is done is not called by storages that
        # outlive it (the model's, between estimates).
        self._watch[serial] = weakref.ref(storage, functools.partial(self._freed, address, serial))

    def resize(self, tensor: torch.Tensor, nbytes: int) -> None:
        """A storage resized in place (``UntypedStorage.resize_``, which no operator shows: FSDP frees and takes back
        the memory of its all-gathered weights so): its bytes released and ``nbytes`` taken, as the allocator
        frees a block and allocates another."""
        storage = tensor.untyped_storage()
        address = storage._cdata
        serial = self._live.get(address)
        if serial is None or self.allocations[serial].nbytes == nbytes:
            return
        self._release(serial)
        del self._watch[serial]
        resized = self._allocate(nbytes, self.allocations[serial].part)
        self.resized.add(resized)
        self._live[address] = resized
        self._watch[resized] = weakref.ref(storage, functools.partial(self._freed, address, resized))

    def _allocate(self, nbytes: int, part: Part | None) -> int:
        serial = next(self._serials)
        allocation = self.allocations[serial] = Allocation(nbytes, part)
        self.events.append(("alloc", serial, nbytes))
        self.live_bytes += nbytes
        self._count(allocation, 1)
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self.peak_event = len(self.events)
        return serial

    def _freed(self, address: int, serial: int, storage: weakref.ref[torch.UntypedStorage]) -> None:
        if self._live.get(address) == serial:
            del self._live[address]
        del self._watch[serial]
        self._release(serial)

    def _release(self, serial: int) -> None:
        allocation = self.allocations[serial]
        self.live_bytes -= allocation.nbytes
        self._count(allocation, -1)
        self.events.append(("free", serial, 0))

    def _count(self, allocation: Allocation, sign: int) -> None:
        part = allocation.part or self.default_part
        self._part_bytes[part] += sign * allocation.nbytes
        self._part_most[part] = max(self._part_most[part], self._part_bytes[part])

    def most_by_part(self) -> dict[Part, int]:
        """Each part's largest live total during the step (every part on its own, not at one moment)."""
        return dict(self._part_most)

    def live_at_peak(self) -> Parts:
        """The bytes live at the peak, by the part each storage was claimed by in the end."""
        return self.sum_parts(self.serials_at_peak())

    def serials_at_peak(self) -> set[int]:
        """The allocations live at the peak."""
        live: set[int] = set()
        for kind, serial, _ in self.events[: self.peak_event]:
            if kind == "alloc":
                live.add(serial)
            else:
                live.discard(serial)
        return live

    def sum_parts(self, serials: Iterable[int]) -> Parts:
        """The bytes of the allocations ``serials`` by part."""
        totals = dict.fromkeys(PARTS, 0)
        for serial in serials:
            allocation = self.allocations[serial]
            totals[allocation.part or self.default_part] += allocation.nbytes
        return Parts(**totals)

    def live_serials(self, tensors: Iterable[torch.Tensor | None]) -> set[int]:
        """The allocations behind ``tensors`` that are live now (each storage once)."""
        return {s for t in tensors if t is not None and (s := self._live.get(_address(t))) is not None}


def _plain(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that hold a tensor's memory: a wrapper subclass's inner ones (a DTensor's local shard, under
    sharding), any other tensor itself."""
    if not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    inner = (getattr(tensor, name) for name in names)
    return [plain for t in inner if isinstance(t, torch.Tensor) for plain in _plain(t)]


def _address(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage()._cdata)
