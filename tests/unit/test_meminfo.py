"""Memory and swap from one read of /proc/meminfo, as psutil's virtual_memory() and swap_memory() give them."""

from __future__ import annotations

import psutil

from gputop.collect.host import memory_and_swap, parse_meminfo

MEMINFO = b"""MemTotal:       24684092 kB
MemFree:         1234567 kB
MemAvailable:   23609064 kB
Buffers:          120000 kB
SwapCached:            0 kB
SwapTotal:       2097148 kB
SwapFree:        1048576 kB
HugePages_Total:       0
"""


def test_meminfo_gives_totals_available_and_swap_used_in_bytes() -> None:
    assert parse_meminfo(MEMINFO) == (24684092 * 1024, 23609064 * 1024, 2097148 * 1024, (2097148 - 1048576) * 1024)


def test_a_kernel_without_mem_available_or_a_torn_line_is_left_to_psutil() -> None:
    assert parse_meminfo(MEMINFO.replace(b"MemAvailable:", b"MemAvail:")) is None
    assert parse_meminfo(MEMINFO.replace(b"SwapFree:        1048576 kB", b"SwapFree:")) is None


def test_the_same_totals_as_psutil_on_this_machine() -> None:
    total, available, swap_total, swap_used = memory_and_swap()
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    assert (total, swap_total) == (memory.total, swap.total)
    assert abs(available - memory.available) < 256 * 2**20  # read a moment apart
    assert abs(swap_used - swap.used) < 256 * 2**20
