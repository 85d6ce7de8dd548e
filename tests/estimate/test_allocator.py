"""The CUDA caching allocator's replay: rounding, the two pools' segment sizes, best fit, splitting and merging,
and reserved memory that is never given back."""

from __future__ import annotations

import pytest

from gputop.estimate.allocator import CachingAllocator, replay, rounded, segment_bytes

pytestmark = pytest.mark.fast

KIB, MIB = 1024, 1024**2


def test_requests_round_up_to_512_bytes_and_at_least_512():
    assert [rounded(n) for n in (1, 512, 513, 1000, 4096)] == [512, 512, 1024, 1024, 4096]


def test_segments_are_2_mib_for_small_20_mib_for_medium_and_rounded_to_2_mib_for_large_requests():
    assert segment_bytes(512) == segment_bytes(MIB) == 2 * MIB
    assert segment_bytes(MIB + 512) == segment_bytes(10 * MIB - 512) == 20 * MIB
    assert segment_bytes(10 * MIB) == 10 * MIB
    assert segment_bytes(10 * MIB + 1) == 12 * MIB


def test_small_requests_share_one_2_mib_segment():
    peak = replay([("alloc", n, 100 * KIB) for n in range(20)])
    assert (peak.reserved_bytes, peak.segments) == (2 * MIB, 1)
    assert peak.allocated_bytes == 20 * 100 * KIB


def test_a_freed_block_is_reused_not_reserved_again():
    allocator = CachingAllocator()
    allocator.allocate(1, 64 * MIB)
    allocator.free(1)
    allocator.allocate(2, 64 * MIB)
    assert allocator.reserved_bytes == 64 * MIB
    assert allocator.peak_allocated_bytes == 64 * MIB


def test_reserved_memory_is_never_released():
    peak = replay([("alloc", 1, 64 * MIB), ("free", 1, 0), ("alloc", 2, 100 * MIB)])
    assert peak.reserved_bytes == 164 * MIB


def test_medium_requests_split_a_20_mib_segment_and_merge_back_when_freed():
    allocator = CachingAllocator()
    allocator.allocate(1, 4 * MIB)
    allocator.allocate(2, 4 * MIB)
    assert (allocator.reserved_bytes, allocator.segments) == (20 * MIB, 1)
    allocator.free(1)
    allocator.free(2)
    allocator.allocate(3, 18 * MIB)  # fits only once both blocks merged with the rest of the segment
    assert allocator.segments == 1


def test_a_large_block_is_not_split_for_a_remainder_of_1_mib_or_less():
    allocator = CachingAllocator()
    allocator.allocate(1, 12 * MIB)
    allocator.free(1)
    allocator.allocate(2, 11 * MIB + 512 * KIB)  # the 512 KiB left over stays with the block
    allocator.allocate(3, 2 * MIB)
    assert allocator.segments == 2
    assert allocator.allocated_bytes == 12 * MIB + 2 * MIB


def test_best_fit_takes_the_smallest_free_block_that_is_large_enough():
    allocator = CachingAllocator()
    for key, size in ((1, 40 * MIB), (2, 12 * MIB)):
        allocator.allocate(key, size)
    allocator.free(1)
    allocator.free(2)
    allocator.allocate(3, 11 * MIB)
    allocator.allocate(4, 39 * MIB)
    assert allocator.segments == 2


def test_zero_byte_tensors_take_nothing():
    assert replay([("alloc", 1, 0), ("free", 1, 0)]).reserved_bytes == 0
