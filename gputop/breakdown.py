"""Where a training process's memory goes, per device: the parts every view of it shows (the training panel and
screen, ``--json``, the exporter, the advisor), computed in one place from the probe's report.

A CUDA device's parts stack up to what NVML says the process holds, as the memory looks at the step's peak:

- ``weights``, ``gradients``, ``optimizer``: the parameters, their gradients and the optimizers' state, counted
  tensor by tensor by the probe right after an optimizer step;
- ``other``: everything else allocated from one step to the next (buffers such as BatchNorm statistics, the batch
  on the GPU, metrics kept on the device): allocated after a step minus the three above;
- ``activations``: what the step adds on top at its peak (activations saved for the backward pass, and
  temporaries): the allocator's peak allocated minus allocated after a step;
- ``cache``: memory the caching allocator keeps reserved beyond that peak, free for reuse;
- ``outside``: what NVML counts for the process beyond PyTorch's reservations (the CUDA context, cuBLAS and cuDNN
  workspaces, NCCL's buffers).

On the CPU only the first three exist: the CPU has no caching allocator to ask. A part that cannot be had is None.
"""

from __future__ import annotations

from gputop.frozen import immutable
from gputop.model import CudaMemory, ProbeReport, TensorMemory

PARTS = ("weights", "gradients", "optimizer", "other", "activations", "cache", "outside")
"""The parts in the order they stack, from what persists to what surrounds it."""

PART_NAMES = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer state",
    "other": "other tensors",
    "activations": "activations",
    "cache": "allocator cache",
    "outside": "outside PyTorch",
}
"""How each part is named to users."""


@immutable
class DeviceMemory:
    """One device's memory by part, in bytes; see the module's description of each part."""

    device: str
    gpu_index: int | None = None
    parameters: int | None = None
    weight_dtypes: tuple[tuple[str, int], ...] = ()
    weights: int | None = None
    gradients: int | None = None
    optimizer: int | None = None
    other: int | None = None
    activations: int | None = None
    cache: int | None = None
    outside: int | None = None

    def parts(self) -> tuple[tuple[str, int | None], ...]:
        """``(part, bytes)`` in stacking order."""
        return tuple((name, getattr(self, name)) for name in PARTS)

    @property
    def total(self) -> int:
        """The sum of the parts that are known: on a CUDA device with every part, NVML's figure for the process."""
        return sum(size for _, size in self.parts() if size)

    def largest(self) -> tuple[str, int] | None:
        """The part that holds the most, or None when none is known."""
        known = [(size, name) for name, size in self.parts() if size]
        if not known:
            return None
        size, name = max(known)
        return name, size


def device_memory(probe: ProbeReport) -> tuple[DeviceMemory, ...]:
    """Each device the probe counted tensors on, CUDA devices first, with every part that can be had."""
    if not probe.ok:
        return ()
    cuda = {d.device: d for d in probe.cuda}
    found = [_device(t, cuda.get(t.cuda_index) if t.cuda_index is not None else None) for t in probe.tensors]
    return tuple(sorted(found, key=lambda d: (d.device == "cpu", d.device)))


def _device(tensors: TensorMemory, stats: CudaMemory | None) -> DeviceMemory:
    counted = _sum(tensors.weights_bytes, tensors.gradients_bytes, tensors.optimizer_bytes)
    persistent = tensors.allocated_after_step_bytes
    peak = None if stats is None else stats.allocated_peak_bytes
    reserved = None if stats is None else stats.reserved_bytes
    nvml = None if stats is None else stats.nvml_process_bytes
    top = peak if peak is None or persistent is None else max(peak, persistent)
    return DeviceMemory(
        device=tensors.device,
        gpu_index=None if stats is None else stats.gpu_index,
        parameters=tensors.parameters,
        weight_dtypes=tensors.weight_dtypes,
        weights=tensors.weights_bytes,
        gradients=tensors.gradients_bytes,
        optimizer=tensors.optimizer_bytes,
        other=_less(persistent, counted),
        activations=_less(top, persistent),
        cache=_less(reserved, top),
        outside=_less(nvml, reserved),
    )


def _sum(*sizes: int | None) -> int | None:
    return None if any(size is None for size in sizes) else sum(size for size in sizes if size is not None)


def _less(whole: int | None, part: int | None) -> int | None:
    """``whole - part``, never below zero (two readings a moment apart), None when either is unknown."""
    return None if whole is None or part is None else max(0, whole - part)
