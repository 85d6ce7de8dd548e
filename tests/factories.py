"""What many tests build or wait for, in one place: a ``HostInfo`` with the values a test names, and the waits
(polling a condition from a test, or letting a Textual app run under Pilot until a condition holds)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psutil
import pytest

from gputop.model import HostInfo

GIB = 1024**3
T = TypeVar("T")

DEADLINE_S = 60.0
"""How long a test waits for what a real process, terminal or app must do before it fails. A wait ends as soon
as its condition holds, so a long deadline costs nothing where the test passes; on a machine whose CPUs other
work keeps busy, a Python start that imports torch alone can take tens of seconds."""


def host_info(
    hostname: str = "trainer-01",
    *,
    per_core: Sequence[float] = (),
    cpu_percent: float | None = None,
    cores: int | None = None,
    usable_cores: int | None = None,
    load_average: tuple[float, float, float] | None = None,
    memory_gib: float = 64,
    used_gib: float = 16,
    available_gib: float | None = None,
    swap_gib: float = 0,
    swap_used_gib: float = 0,
) -> HostInfo:
    """The machine a snapshot was taken on. Unnamed values follow from the named ones: the CPU share is the mean
    of ``per_core`` (50 % without cores), the core count is ``len(per_core)`` (2 without cores), all of them are
    usable, and what is not used of the memory is available."""
    if cpu_percent is None:
        cpu_percent = round(sum(per_core) / len(per_core), 1) if per_core else 50.0
    cores = cores if cores is not None else (len(per_core) or 2)
    return HostInfo(
        hostname=hostname,
        cpu_percent=cpu_percent,
        cpu_percent_per_core=tuple(per_core),
        cpu_count=cores,
        usable_cpu_count=usable_cores if usable_cores is not None else cores,
        load_average=load_average,
        memory_total_bytes=int(memory_gib * GIB),
        memory_used_bytes=int(used_gib * GIB),
        memory_available_bytes=int((available_gib if available_gib is not None else memory_gib - used_gib) * GIB),
        swap_total_bytes=int(swap_gib * GIB),
        swap_used_bytes=int(swap_used_gib * GIB),
    )


def wait_until(
    condition: Callable[[], T | None],
    what: str = "the condition",
    timeout_s: float = DEADLINE_S,
    every_s: float = 0.05,
    last: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition`` until it returns something truthy, and return that; fail the test after ``timeout_s``,
    saying ``what`` was awaited and, with ``last``, what was there instead."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"never got {what} within {timeout_s} s" + (f"; instead:\n{last()}" if last else ""))
        time.sleep(every_s)


async def settle(
    pilot: Any, condition: Callable[[], object], what: str = "there", timeout_s: float = DEADLINE_S
) -> None:
    """Let the app under ``pilot`` run until ``condition()`` holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"the app never got {what} within {timeout_s} s")
        await pilot.pause(0.02)


def kill_family(pid: int) -> None:
    """Kill a process started in its own session, its process group and every process below it, and wait for
    them. The process group alone misses some: torchrun starts each rank in a session of its own, and a rank whose
    launcher is killed waits for its peers in a collective for half an hour."""
    try:
        family = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(family, timeout=DEADLINE_S)
