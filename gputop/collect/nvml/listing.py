"""The processes on one GPU as this caller may list them, in MIG mode or not: the one question the collector's
slow tick and ``gputop doctor`` both ask, so that doctor says what the dashboard shows.

A GPU in MIG mode gives its own list to root only; others read each instance's list (``mig.read_processes``). The
answer leaves on the slot why nothing could be listed (``process_reason``), whether the lists were the instances'
(``processes_per_instance``), and the notice the dashboard shows (``process_notice``).
"""

from __future__ import annotations

from gputop.collect.nvml import mig
from gputop.collect.nvml.processes import read_processes
from gputop.collect.nvml.slot import GpuSlot, Variants
from gputop.model import GpuProcess


def list_processes(slot: GpuSlot, variants: Variants, in_mig: bool, sample_stale_s: float) -> list[GpuProcess]:
    """The GPU's processes; a GPU in MIG mode has its instances found first (they come and go)."""
    if in_mig:
        mig.find_instances(slot)
        return mig.read_processes(slot, variants)
    return read_processes(slot, variants, sample_stale_s)
