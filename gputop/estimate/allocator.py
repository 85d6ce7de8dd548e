"""The CUDA caching allocator, replayed: from a sequence of allocations and frees, the bytes PyTorch reserves from
the driver, and what NVML shows for the process once the CUDA context is added.

PyTorch never hands a tensor's memory back to the driver when the tensor dies: it keeps the block in a pool for the
next request, so ``torch.cuda.memory_reserved()`` (and ``nvidia-smi``) stay above what is allocated. The model
below follows ``c10/cuda/CUDACachingAllocator.cpp`` with its default settings (no ``expandable_segments``, no
``max_split_size_mb``, no power-of-two rounding): sizes rounded to 512 bytes; requests of 1 MiB or less served from
2 MiB segments of a small pool; larger ones from a large pool whose segments are 20 MiB for requests under 10 MiB,
else the request rounded up to 2 MiB; the best-fitting free block is taken and split, freed blocks merge with free
neighbours, and segments are never released (PyTorch only releases them when ``cudaMalloc`` fails, which is the
out-of-memory case this estimate is there to avoid). Pure: no torch.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

# The allocator's constants, as c10/cuda/CUDACachingAllocator.cpp (and CUDAAllocatorConfig.h) define them.
MIN_BLOCK_BYTES = 512
"""``kMinBlockSize``: every request is rounded up to a multiple of 512 bytes."""
SMALL_REQUEST_BYTES = 1024**2
"""``kSmallSize``: the largest request served from the small pool."""
SMALL_SEGMENT_BYTES = 2 * 1024**2
"""``kSmallBuffer``: the small pool's segments."""
LARGE_SEGMENT_BYTES = 20 * 1024**2
"""``kLargeBuffer``: the segment a large request under ``MIN_LARGE_ALLOC_BYTES`` gets, shared with later ones."""
MIN_LARGE_ALLOC_BYTES = 10 * 1024**2
"""``kMinLargeAlloc``: from this size a request gets a segment of its own size, rounded up to ``ROUND_LARGE_BYTES``."""
ROUND_LARGE_BYTES = 2 * 1024**2
"""``kRoundLarge``."""

Event = tuple[Literal["alloc", "free"], int, int]
"""One allocator event: ``("alloc", key, bytes)`` or ``("free", key, 0)``, ``key`` naming the allocation."""


def rounded(nbytes: int) -> int:
    """The bytes the allocator gives a request of ``nbytes``: a multiple of 512, at least 512."""
    return max(MIN_BLOCK_BYTES, -(-nbytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def segment_bytes(size: int) -> int:
    """The segment ``cudaMalloc`` gets when no cached block fits a rounded request of ``size`` bytes."""
    if size <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


@dataclass(eq=False)
class _Block:
    size: int
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None
    order: int = field(default_factory=itertools.count().__next__)
    """Ties between free blocks of one size go to the older one, as the allocator's (size, address) order does."""


@dataclass
class _Pool:
    small: bool
    free: list[tuple[int, int, _Block]] = field(default_factory=list)
    """Free blocks sorted by (size, age): the first one not smaller than a request is the best fit."""

    def take(self, size: int) -> _Block | None:
        at = bisect.bisect_left(self.free, (size, -1))
        if at == len(self.free):
            return None
        return self.free.pop(at)[2]

    def put(self, block: _Block) -> None:
        bisect.insort(self.free, (block.size, block.order, block))

    def remove(self, block: _Block) -> None:
        self.free.remove((block.size, block.order, block))

    def splits(self, block: _Block, size: int) -> bool:
        """Whether a free block is cut to ``size``: the rest must be a useful block (``should_split``)."""
        rest = block.size - size
        return rest >= MIN_BLOCK_BYTES if self.small else rest > SMALL_REQUEST_BYTES


@dataclass(frozen=True)
class AllocatorPeak:
    """What the replay found: the most bytes in blocks handed out (``allocated_bytes``, sizes rounded) and the
    bytes in segments taken from the driver (``reserved_bytes``; never released, so the last figure is the peak)."""

    allocated_bytes: int
    reserved_bytes: int
    segments: int


class CachingAllocator:
    """The caching allocator's two pools, fed one allocation or free at a time."""

    def __init__(self) -> None:
        self._pools = (_Pool(small=True), _Pool(small=False))
        self._blocks: dict[int, tuple[_Block, _Pool]] = {}
        self.allocated_bytes = 0
        self.peak_allocated_bytes = 0
        self.reserved_bytes = 0
        self.segments = 0

    def allocate(self, key: int, nbytes: int) -> None:
        """Serve a request of ``nbytes`` known by ``key`` (zero bytes take no memory, as in PyTorch)."""
        if nbytes == 0:
            return
        size = rounded(nbytes)
        pool = self._pools[0] if size <= SMALL_REQUEST_BYTES else self._pools[1]
        block = pool.take(size)
        if block is None:
            block = _Block(segment_bytes(size))
            self.reserved_bytes += block.size
            self.segments += 1
        if pool.splits(block, size):
            rest = _Block(block.size - size, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            pool.put(rest)
        block.free = False
        self._blocks[key] = (block, pool)
        self.allocated_bytes += block.size
        self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)

    def free(self, key: int) -> None:
        """Return ``key``'s block to its pool, merged with the free blocks beside it."""
        found = self._blocks.pop(key, None)
        if found is None:
            return
        block, pool = found
        self.allocated_bytes -= block.size
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                pool.remove(neighbour)
                block = _merge(block, neighbour)
        pool.put(block)

    def peak(self) -> AllocatorPeak:
        return AllocatorPeak(self.peak_allocated_bytes, self.reserved_bytes, self.segments)


def _merge(block: _Block, neighbour: _Block) -> _Block:
    """One free block from two adjacent ones of a segment; returns the one that remains."""
    first, second = (neighbour, block) if neighbour is block.prev else (block, neighbour)
    first.size += second.size
    first.next = second.next
    if second.next is not None:
        second.next.prev = first
    first.order = min(first.order, second.order)
    return first


def replay(events: Iterable[Event]) -> AllocatorPeak:
    """The allocator's peak allocated and reserved bytes over ``events``, in their order."""
    allocator = CachingAllocator()
    for kind, key, nbytes in events:
        if kind == "alloc":
            allocator.allocate(key, nbytes)
        else:
            allocator.free(key)
    return allocator.peak()
