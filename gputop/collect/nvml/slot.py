"""What the NVML collector remembers between ticks: per GPU (``GpuSlot``) and per driver (``Variants``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputop.model import GPU_LOST_STATE, GpuProcess, GpuState, ProcessKind

Put = Callable[[str, Any, str | None], None]
"""Records one field's value and, when it could not be read, the reason."""


@dataclass
class Variants:
    """Which variant of a versioned call the loaded driver answered; decided once, on first success."""

    memory_v2: bool | None = None
    reasons_fn: str | None = None
    temperature_fn: str | None = None
    processes: dict[ProcessKind, int] = field(default_factory=dict)


@dataclass
class GpuSlot:
    """What the collector remembers about one GPU between ticks."""

    index: int
    handle: Any = None
    name: str | None = None
    uuid: str | None = None
    max_clocks: tuple[int | None, int | None] | None = None
    pci_bus_id: str | None = None
    """The GPU's PCI bus id once read: it does not change while the driver runs."""
    unsupported: dict[str, str] = field(default_factory=dict)
    lost_reason: str | None = None
    lost_state: GpuState = GPU_LOST_STATE
    retry_at: float = 0.0
    slow: dict[str, Any] = field(default_factory=dict)
    slow_reasons: dict[str, str] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    # Process lists are read on the slow cadence only; their notice is kept with them so that fast ticks,
    # which reuse the lists, repeat it instead of dropping it until the next slow tick.
    process_notice: str | None = None
    process_reason: str | None = None
    """Why this caller could not list the GPU's processes (the compute list's answer, for a GPU in MIG mode its
    instances' too), None where they were listed: what ``gputop doctor`` reports."""
    processes_per_instance: bool = False
    """The processes of a GPU in MIG mode came from each instance's own list (the GPU's own is root's only)."""
    process_samples: dict[int, tuple[int, float, float]] = field(default_factory=dict)
    last_sample_us: int = 0
    gpm_sample: Any = None
    gpm_spare: Any = None
    """A GPM sample buffer the next tick fills (the one before the last): two buffers take turns."""
    gpm_request: Any = None
    """The GPM metrics request, built once with the metric ids (``gpm._request_type``)."""
    gpm_asked: tuple[list[tuple[str, int | None]], list[str]] = field(default_factory=lambda: ([], []))
    """The fields the request asks for in order, with their scale, and the fields this pynvml has no id for."""
    gpm_supported: bool | None = None
    pcie_throughput_at: float | None = None
    """When PCIe throughput was last read (monotonic): each read samples the bus for 20 ms, so it is reused a while."""
    health_before: tuple[float, int | None, float | None] | None = None
    """The last health reading's time (epoch seconds), PCIe replay count and thermal violation seconds: the rates
    are taken over the time since."""
    mig_slots: list[Any] = field(default_factory=list)
    """The GPU's MIG instances (``mig.MigSlot``), found on the slow cadence while it is in MIG mode."""
