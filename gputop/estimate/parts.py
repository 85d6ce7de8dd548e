"""The parts of a training step's memory, and the figures an estimate gives for one batch size. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

Part = Literal["weights", "gradients", "optimizer", "activations", "temporaries"]
PARTS: tuple[Part, ...] = ("weights", "gradients", "optimizer", "activations", "temporaries")
"""In the order a tensor is claimed: a tensor that is both a weight and saved for the backward pass is a weight."""

RULE_OF_THUMB_BYTES_PER_PARAMETER = 16
"""The rule of thumb for mixed-precision Adam (fp16/bf16 weights and gradients, fp32 master weights and two
fp32 moments: 2 + 2 + 4 + 4 + 4 bytes per parameter), which counts no activations at all."""


@dataclass(frozen=True)
class Parts:
    """Bytes by part. ``sum()`` is their total."""

    weights: int = 0
    gradients: int = 0
    optimizer: int = 0
    activations: int = 0
    temporaries: int = 0

    def sum(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class BatchEstimate:
    """One batch size's estimate.

    Attributes:
        at_peak: what was live at the peak of the step, by part; sums to ``peak_allocated_bytes``.
        held: each part at its own largest: weights, all gradients, all optimizer state, the activations saved
            for the backward pass at the end of the forward, the temporaries at the peak.
        peak_allocated_bytes: the most bytes tensors held at once (their exact sizes).
        cuda_allocated_bytes: the same moment in the CUDA allocator's blocks (each rounded up to 512 bytes):
            what ``torch.cuda.max_memory_allocated()`` would report.
        reserved_bytes: the caching allocator's segments: ``torch.cuda.max_memory_reserved()``.
        nvml_bytes: reserved plus the CUDA context: what NVML and nvidia-smi show for the process.
        fits: whether ``nvml_bytes`` stays under the GPU's memory less the margin; None without a GPU size.
        gathered_bytes: under FSDP (``fsdp``, ``zero2``, ``zero3``), the all-gathered full weights live at the peak
            (in its activations and temporaries: what the forward saves of them, and the rest); None otherwise.
    """

    batch_size: int
    at_peak: Parts
    held: Parts
    peak_allocated_bytes: int
    cuda_allocated_bytes: int
    reserved_bytes: int
    nvml_bytes: int
    fits: bool | None
    gathered_bytes: int | None = None


@dataclass(frozen=True)
class LayerRow:
    """One module in the order the forward pass first called it.

    Attributes:
        name: its qualified name in the model (``features.0``); the model itself is ``""``.
        kind: its class name.
        depth: how deep it sits (the model is 0).
        parameters: the parameters it holds itself, not counting its children's.
        parameter_bytes: their bytes.
        saved_bytes: the activation bytes its forward saved for the backward pass, its children's included.
        checkpoint_saves_bytes: what checkpointing it would save: its saved bytes less its input's, which a
            checkpoint keeps; None for a module without children.
    """

    name: str
    kind: str
    depth: int
    parameters: int
    parameter_bytes: int
    saved_bytes: int
    checkpoint_saves_bytes: int | None
