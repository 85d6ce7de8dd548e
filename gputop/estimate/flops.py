"""A step's time on a named GPU before launch: its FLOPs (counted by ``gputop.probe.flops``'s counter over one
fake step, the definition the live MFU uses) over the GPU's dense peak for the precision (``gputop.gpu_peaks``),
at the model FLOPs utilisation that large training runs publish. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.estimate.defaults import Precision
from gputop.gpu_peaks import PEAKS, GpuPeak
from gputop.gpu_peaks import Precision as MathPrecision

MFU_BAND = (0.21, 0.46)
"""The MFU of well-tuned training on large accelerators, lowest and highest of the published figures: 21.3 % for
GPT-3 on V100s to 46.2 % for PaLM 540B on TPU v4 (Chowdhery et al., "PaLM: Scaling Language Modeling with
Pathways", 2022, table 3, which also gives Gopher 32.5 % and Megatron-Turing NLG 30.2 %). Small models and small
batches often run below the band: their kernels are too short to fill the GPU."""
MFU_SOURCE = "MFU 21-46 %: Chowdhery et al., PaLM (2022), table 3 (GPT-3 21.3 %, MT-NLG 30.2 %, PaLM 46.2 %)"

MATH_PRECISION: dict[Precision, MathPrecision] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16-mixed": "bf16",
    "fp16-mixed": "fp16",
    "bf16": "bf16",
}
"""The precision a step's matrix products run in, under each of the estimate's precisions."""


@dataclass(frozen=True)
class StepTime:
    """One step's time on a GPU model at the edges of ``MFU_BAND``.

    Attributes:
        gpu: the GPU model (``H100 SXM``).
        peak_tflops: its dense peak for the step's matrix precision.
        peak_source: the document the peak comes from.
        fastest_s: the step at the band's highest MFU.
        slowest_s: the step at its lowest.
        mfu_source: where the band comes from.
    """

    gpu: str
    peak_tflops: float
    peak_source: str
    fastest_s: float
    slowest_s: float
    mfu_source: str = MFU_SOURCE


def find_gpu(name: str) -> GpuPeak | None:
    """The GPU model called ``name`` (any case): its model name (``H100 SXM``), its first word (``H100``: the first
    listed, the SXM part), or the name NVML gives it (``NVIDIA H100 80GB HBM3``)."""
    wanted = " ".join(name.removeprefix("NVIDIA ").split()).casefold()
    for peak in PEAKS:
        names = {peak.model.casefold(), *(n.removeprefix("NVIDIA ").casefold() for n in peak.names)}
        if wanted in names:
            return peak
    return next((p for p in PEAKS if p.model.casefold().split()[0] == wanted), None)


def gpu_names() -> str:
    """The GPU models ``find_gpu`` knows, for an error."""
    return ", ".join(p.model for p in PEAKS)


def step_time(flops: int, gpu: GpuPeak, precision: Precision) -> StepTime | None:
    """The time of a step of ``flops`` on ``gpu`` (each GPU of a sharded run steps its own batch: the FLOPs are
    one GPU's); None where the GPU has no published peak for the precision."""
    peak = gpu.tflops(MATH_PRECISION[precision])
    if peak is None:
        return None
    low, high = MFU_BAND
    return StepTime(gpu.model, peak, gpu.source, flops / (peak * 1e12 * high), flops / (peak * 1e12 * low))
