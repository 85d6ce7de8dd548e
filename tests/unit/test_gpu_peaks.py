"""The table of GPU peaks MFU is measured against: each model found by the name NVML gives it, its dense figures
per precision, each with its source."""

from __future__ import annotations

import pytest

from gputop.codec.bounds import TEXT_LIMITS
from gputop.gpu_peaks import PEAKS, peak_of
from gputop.model import StepCost

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("nvml_name", "model", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.5),
        ("NVIDIA H100 NVL", "H100 NVL", 835.5),
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4", 312.0),
        ("A100-SXM4-40GB", "A100 SXM4", 312.0),  # drivers before R470 left out "NVIDIA"
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe", 312.0),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe", 312.0),
        ("NVIDIA L40S", "L40S", 362.05),
        ("NVIDIA L4", "L4", 121.0),
        ("NVIDIA A10", "A10", 125.0),
        ("NVIDIA A10G", "A10G", 70.0),
        ("Tesla V100-SXM2-32GB", "V100 SXM2", None),
        ("Tesla T4", "T4", None),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 165.2),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090", 71.0),
        ("NVIDIA B200", "B200", 2250.0),
    ],
)
def test_a_gpu_is_found_by_the_name_nvml_gives_it(nvml_name: str, model: str, bf16: float | None) -> None:
    peak = peak_of(nvml_name)

    assert peak is not None and (peak.model, peak.bf16) == (model, bf16)


@pytest.mark.parametrize("name", ["NVIDIA H100", "NVIDIA L40", "NVIDIA GeForce RTX 4080", "", None, "H100 80GB HBM3x"])
def test_a_model_not_in_the_table_has_no_peak(name: str | None) -> None:
    assert peak_of(name) is None


def test_the_figures_are_dense_the_h100_sxm_bf16_peak_being_half_its_sparse_1979() -> None:
    peak = peak_of("NVIDIA H100 80GB HBM3")

    assert peak is not None and (peak.fp32, peak.tf32, peak.bf16, peak.fp16, peak.fp8) == (
        67.0,
        494.5,
        989.5,
        989.5,
        1979.0,
    )


def test_bf16_and_fp16_have_the_same_peak_wherever_a_gpu_has_both() -> None:
    """What lets autocast, whose dtype the probe does not report, be measured against either."""
    assert all(p.bf16 == p.fp16 for p in PEAKS if p.bf16 is not None and p.fp16 is not None)


def test_every_row_names_its_source_and_every_name_is_one_gpus() -> None:
    names = [name.removeprefix("NVIDIA ").casefold() for p in PEAKS for name in p.names]
    assert len(names) == len(set(names))
    for peak in PEAKS:
        assert "https://" in peak.source and len(peak.source) <= TEXT_LIMITS[StepCost]["peak_source"]
        assert peak.fp32 > 0
        faster = [v for v in (peak.tf32, peak.bf16, peak.fp16, peak.fp8) if v is not None]
        assert faster == sorted(faster) and all(v >= peak.fp32 for v in faster)


def test_gpus_without_tensor_cores_for_a_precision_have_no_figure_for_it() -> None:
    v100, t4 = peak_of("Tesla V100-SXM2-16GB"), peak_of("Tesla T4")

    assert v100 is not None and (v100.tf32, v100.bf16, v100.fp16) == (None, None, 125.0)
    assert t4 is not None and (t4.tf32, t4.bf16, t4.fp8) == (None, None, None)
