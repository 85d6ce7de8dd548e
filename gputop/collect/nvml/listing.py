"""The processes on one GPU as this caller may list them, in MIG mode or not: the one question the collector's
slow tick and ``gputop doctor`` both ask, so that doctor says what the dashboard shows.

A GPU in MIG mode gives its own list to root only; others read each instance's list (``mig.read_processes``). The
answer leaves on the slot why nothing could be listed (``process_reason``), whether the lists were the instances'
(``processes_per_instance``), and the notice the dashboard shows (``process_notice``). ``process_list_access`` asks
it of GPUs by handle alone, for a caller with an NVML session of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gputop.collect.nvml import mig
from gputop.collect.nvml.errors import LOST, GpuLost
from gputop.collect.nvml.processes import read_processes
from gputop.collect.nvml.slot import GpuSlot, Variants
from gputop.frozen import immutable
from gputop.model import COMPUTE, GRAPHICS, GpuProcess


def list_processes(slot: GpuSlot, variants: Variants, in_mig: bool, sample_stale_s: float) -> list[GpuProcess]:
    """The GPU's processes; a GPU in MIG mode has its instances found first (they come and go)."""
    if in_mig:
        mig.find_instances(slot)
        return mig.read_processes(slot, variants)
    return read_processes(slot, variants, sample_stale_s)


@immutable
class ProcessList:
    """What one GPU's process list told this caller."""

    index: int
    compute: int | None
    """How many of its processes run compute work, where the list could be read."""
    reason: str | None
    """Why it could not: ``no permission``, ``not in this driver``, NVML's error, or ``GPU is lost``."""
    per_instance: bool
    """The GPU is in MIG mode and its instances' own lists answered (its own list is root's)."""


@immutable
class ProcessListAccess:
    """Whether this caller may list each GPU's processes, and which compute call the driver answered (3 for
    ``nvmlDeviceGetComputeRunningProcesses_v3``, 2, or 1 for the legacy v1 symbol; None where none did)."""

    gpus: tuple[ProcessList, ...]
    compute_call: int | None


def process_list_access(handles: Iterable[tuple[int, Any]]) -> ProcessListAccess:
    """Each GPU's processes listed once, exactly as the collector's slow tick lists them (MIG mode read first, the
    newest call the driver exports), from ``(index, handle)`` pairs of an NVML session the caller holds open.
    Never raises for an NVML error: a GPU that is gone answers ``GPU is lost``."""
    variants = Variants()
    answers = []
    for index, handle in handles:
        slot = GpuSlot(index=index, handle=handle)
        try:
            in_mig = mig.read_mode(slot, lambda name, value, reason: None)
            found = list_processes(slot, variants, in_mig, sample_stale_s=0.0)
        except GpuLost:
            answers.append(ProcessList(index, None, LOST, False))
            continue
        finally:
            mig.close(slot)
        reason = slot.process_reason
        compute = sum(p.kind != GRAPHICS for p in found) if reason is None else None
        answers.append(ProcessList(index, compute, reason, slot.processes_per_instance))
    return ProcessListAccess(tuple(answers), variants.processes.get(COMPUTE))
