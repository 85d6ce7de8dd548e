"""The dense peak TFLOP/s of GPU models, per precision, with the document each figure comes from: the denominator
of MFU (model FLOPs utilisation).

NVIDIA's datasheets give tensor-core figures "with sparsity" (2:4 structured sparsity, which training does not
use); those are halved here, as the datasheets' footnotes say the dense figure is half. Where a document gives a
dense figure (the A100, L40S, A10 datasheets, the GeForce whitepapers), it is taken as it stands. GeForce cards
run FP16 and BF16 tensor math at half rate with FP32 accumulation, which is what PyTorch uses: their figures are
the FP32-accumulate ones. None: the GPU has no tensor cores for that precision (or no figure is published), and
MFU is not computed for it.

A model is matched by the name NVML gives it (``nvmlDeviceGetName``), as real drivers spell them; a leading
``NVIDIA`` is ignored, since drivers before R470 left it out of some (``A100-SXM4-40GB``).
"""

from __future__ import annotations

from typing import Literal

from gputop.frozen import immutable

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
"""The precision of a job's matrix math: what its tensor cores (or, for ``fp32``, its CUDA cores) run."""


@immutable
class GpuPeak:
    """One GPU model's dense peaks in TFLOP/s, and where they come from."""

    model: str
    names: tuple[str, ...]
    """The names NVML gives it, as ``nvmlDeviceGetName`` answers."""
    fp32: float
    tf32: float | None
    bf16: float | None
    fp16: float | None
    fp8: float | None
    source: str

    def tflops(self, precision: Precision) -> float | None:
        value: float | None = getattr(self, precision)
        return value


_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet,"
    " https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
    " (tensor figures with sparsity, halved)"
)
_H200 = (
    "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/"
    " (tensor figures with sparsity, halved)"
)
_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet,"
    " https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_V100 = (
    "NVIDIA Tesla V100 GPU datasheet,"
    " https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
    " (Tensor Performance: FP16 with FP32 accumulate)"
)

PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("H100 SXM", ("NVIDIA H100 80GB HBM3",), 67.0, 494.5, 989.5, 989.5, 1979.0, _H100),
    GpuPeak("H100 PCIe", ("NVIDIA H100 PCIe",), 51.0, 378.0, 756.5, 756.5, 1513.0, _H100),
    GpuPeak("H100 NVL", ("NVIDIA H100 NVL",), 60.0, 417.5, 835.5, 835.5, 1670.5, _H100),
    GpuPeak("H200 SXM", ("NVIDIA H200",), 67.0, 494.5, 989.5, 989.5, 1979.0, _H200),
    GpuPeak("H200 NVL", ("NVIDIA H200 NVL",), 60.0, 417.5, 835.5, 835.5, 1670.5, _H200),
    GpuPeak("A100 SXM4", ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"), 19.5, 156.0, 312.0, 312.0, None, _A100),
    GpuPeak("A100 PCIe", ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"), 19.5, 156.0, 312.0, 312.0, None, _A100),
    GpuPeak(
        "L40S",
        ("NVIDIA L40S",),
        91.6,
        183.0,
        362.05,
        362.05,
        733.0,
        "NVIDIA L40S datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413",
    ),
    GpuPeak(
        "L4",
        ("NVIDIA L4",),
        30.3,
        60.0,
        121.0,
        121.0,
        242.5,
        "NVIDIA L4 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
        " (tensor figures with sparsity, halved)",
    ),
    GpuPeak(
        "A10",
        ("NVIDIA A10",),
        31.2,
        62.5,
        125.0,
        125.0,
        None,
        "NVIDIA A10 Tensor Core GPU datasheet,"
        " https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
    ),
    GpuPeak(
        "A10G",
        ("NVIDIA A10G",),
        35.0,
        None,
        70.0,
        70.0,
        None,
        "Baseten, NVIDIA A10 vs A10G for ML model inference,"
        " https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ (AWS's part: NVIDIA publishes no"
        " datasheet, and no TF32 figure)",
    ),
    GpuPeak("V100 SXM2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), 15.7, None, None, 125.0, None, _V100),
    GpuPeak("V100 PCIe", ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"), 14.0, None, None, 112.0, None, _V100),
    GpuPeak("V100S PCIe", ("Tesla V100S-PCIE-32GB",), 16.4, None, None, 130.0, None, _V100),
    GpuPeak(
        "T4",
        ("Tesla T4", "NVIDIA T4"),
        8.1,
        None,
        None,
        65.0,
        None,
        "NVIDIA T4 Tensor Core GPU datasheet,"
        " https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
        " (mixed precision FP16/FP32)",
    ),
    GpuPeak(
        "GeForce RTX 4090",
        ("NVIDIA GeForce RTX 4090",),
        82.6,
        82.6,
        165.2,
        165.2,
        330.3,
        "NVIDIA Ada GPU Architecture whitepaper, appendix A,"
        " https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
        " (FP32 accumulate, dense)",
    ),
    GpuPeak(
        "GeForce RTX 3090",
        ("NVIDIA GeForce RTX 3090",),
        35.6,
        35.6,
        71.0,
        71.0,
        None,
        "NVIDIA Ampere GA102 GPU Architecture whitepaper,"
        " https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
        " (FP32 accumulate, dense)",
    ),
    GpuPeak(
        "B200",
        ("NVIDIA B200",),
        75.0,
        1100.0,
        2250.0,
        2250.0,
        4500.0,
        "NVIDIA GB200 NVL72 specifications, HGX B200 column,"
        " https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (tensor figures with sparsity, halved)",
    ),
)
"""Every GPU model gputop knows the peaks of."""

_BY_NAME = {name.removeprefix("NVIDIA ").casefold(): peak for peak in PEAKS for name in peak.names}


def peak_of(nvml_name: str | None) -> GpuPeak | None:
    """The peaks of the GPU NVML names ``nvml_name``; None for a model not in ``PEAKS``."""
    if not nvml_name:
        return None
    return _BY_NAME.get(nvml_name.strip().removeprefix("NVIDIA ").casefold())
