"""What ``gputop estimate`` was asked and what it found, as plain values. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.estimate.defaults import Kernels, Precision, Shard
from gputop.estimate.flops import StepTime
from gputop.estimate.parts import RULE_OF_THUMB_BYTES_PER_PARAMETER, BatchEstimate, LayerRow


@dataclass(frozen=True)
class Settings:
    """How the step was run: the optimizer (None in inference), its arguments, the precision, whether blocks were
    checkpointed, whether it was inference only, the CUDA context's bytes, and the GPU's memory (None: unknown)
    with the margin to keep free on it."""

    optimizer: str | None
    optimizer_args: dict[str, object]
    precision: Precision
    checkpointing: bool
    inference: bool
    context_bytes: int
    memory_bytes: int | None
    margin: float
    checkpoint_class: str | None = None
    """The class of the blocks checkpointing was asked to wrap (None: the repeated blocks found)."""
    kernels: Kernels = "cuda"
    """Whose attention kernels the step assumed: ``cuda`` (the fused ones a GPU runs) or ``cpu``."""
    shard: Shard | None = None
    """How the step is spread over ``gpus`` GPUs (None: one GPU); the figures are one GPU's."""
    gpus: int = 1


@dataclass(frozen=True)
class Report:
    """A model's estimate.

    Attributes:
        model: what the model was called (its factory, or its class).
        parameters: the model's parameter count.
        batches: one estimate per batch size asked for, in their order.
        largest_batch: the largest batch that fits the GPU with the margin (0: not even one); None without a
            GPU size.
        search_estimates: how many batch sizes the search for it estimated.
        layers: the layer table (``--layers``), or None.
        flops_per_step: one step's FLOPs at the first batch size (a forward pass in inference), as the live MFU
            counts them; None where they were not counted.
        step_time: that step's time on the GPU model asked for (``gpu_model``), or None.
    """

    model: str
    parameters: int
    settings: Settings
    batches: tuple[BatchEstimate, ...]
    largest_batch: int | None
    search_estimates: int
    layers: tuple[LayerRow, ...] | None
    checkpointed: str | None = None
    """What activation checkpointing wrapped (``16 Bottleneck blocks``); None without checkpointing."""
    flops_per_step: int | None = None
    step_time: StepTime | None = None

    @property
    def rule_of_thumb_bytes(self) -> int:
        return RULE_OF_THUMB_BYTES_PER_PARAMETER * self.parameters


def fits(nvml_bytes: int, memory_bytes: int | None, margin: float) -> bool | None:
    """Whether a process showing ``nvml_bytes`` leaves ``margin`` of ``memory_bytes`` free (None: no GPU size)."""
    if memory_bytes is None:
        return None
    return nvml_bytes <= (1 - margin) * memory_bytes
