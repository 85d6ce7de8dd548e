"""The memory parts of a training process, from a probe report built as a real job's would be: the CUDA-only
parts (activations at the peak, the allocator's cache, what lies outside PyTorch) from ``memory_stats()``
figures, the CPU's parts from the tensors alone."""

from __future__ import annotations

import pytest

from gputop.breakdown import DeviceMemory, device_memory
from gputop.model import PROBE_OK, PROBE_STALE, CudaMemory, ProbeReport, TensorMemory

pytestmark = pytest.mark.fast

MIB = 1 << 20
# A 1.3 B-parameter model in bf16 with fp32 AdamW moments on one GPU, as memory_stats() and NVML would show it.
WEIGHTS, GRADIENTS, OPTIMIZER = 2600 * MIB, 2600 * MIB, 10400 * MIB
TENSORS = TensorMemory(
    "cuda:0",
    parameters=1_300_000_000,
    weights_bytes=WEIGHTS,
    gradients_bytes=GRADIENTS,
    optimizer_bytes=OPTIMIZER,
    weight_dtypes=(("bfloat16", WEIGHTS),),
    allocated_after_step_bytes=WEIGHTS + GRADIENTS + OPTIMIZER + 300 * MIB,
)
STATS = CudaMemory(
    device=0,
    gpu_index=3,
    allocated_bytes=WEIGHTS + OPTIMIZER + 300 * MIB,  # at the batch boundary, after zero_grad(set_to_none)
    allocated_peak_bytes=WEIGHTS + GRADIENTS + OPTIMIZER + 300 * MIB + 21000 * MIB,
    reserved_bytes=WEIGHTS + GRADIENTS + OPTIMIZER + 300 * MIB + 21000 * MIB + 1500 * MIB,
    nvml_process_bytes=WEIGHTS + GRADIENTS + OPTIMIZER + 300 * MIB + 21000 * MIB + 1500 * MIB + 520 * MIB,
)


def test_a_cuda_devices_parts_stack_up_to_what_nvml_says_the_process_holds() -> None:
    (device,) = device_memory(ProbeReport(PROBE_OK, tensors=(TENSORS,), cuda=(STATS,)))

    assert (device.device, device.gpu_index, device.parameters) == ("cuda:0", 3, 1_300_000_000)
    assert dict(device.parts()) == {
        "weights": WEIGHTS,
        "gradients": GRADIENTS,
        "optimizer": OPTIMIZER,
        "other": 300 * MIB,
        "activations": 21000 * MIB,
        "cache": 1500 * MIB,
        "outside": 520 * MIB,
    }
    assert device.total == STATS.nvml_process_bytes
    assert device.largest() == ("activations", 21000 * MIB)


def test_the_cpu_has_only_the_parts_the_tensors_give() -> None:
    cpu = TensorMemory("cpu", parameters=10, weights_bytes=40, gradients_bytes=40, optimizer_bytes=88)

    (device,) = device_memory(ProbeReport(PROBE_OK, tensors=(cpu,)))

    assert dict(device.parts()) == {
        "weights": 40,
        "gradients": 40,
        "optimizer": 88,
        "other": None,
        "activations": None,
        "cache": None,
        "outside": None,
    }
    assert (device.total, device.largest()) == (168, ("optimizer", 88))


def test_readings_a_moment_apart_never_make_a_part_negative() -> None:
    # The allocator released its cache (empty_cache) after the peak: reserved is now below it.
    stats = CudaMemory(device=0, allocated_peak_bytes=900, reserved_bytes=600, nvml_process_bytes=500)
    tensors = TensorMemory("cuda:0", weights_bytes=100, gradients_bytes=100, optimizer_bytes=200)

    (device,) = device_memory(ProbeReport(PROBE_OK, tensors=(tensors,), cuda=(stats,)))

    assert (device.cache, device.outside) == (0, 0)
    assert (device.other, device.activations) == (None, None)  # no allocated-after-step reading: unknown


def test_no_parts_without_a_trusted_report_or_a_step() -> None:
    assert device_memory(ProbeReport(PROBE_STALE, tensors=(TENSORS,), cuda=(STATS,))) == ()
    assert device_memory(ProbeReport(PROBE_OK, cuda=(STATS,))) == ()
    assert DeviceMemory("cuda:0").largest() is None


def test_cuda_devices_come_first() -> None:
    cpu = TensorMemory("cpu", weights_bytes=4)
    devices = device_memory(ProbeReport(PROBE_OK, tensors=(cpu, TENSORS, TensorMemory("cuda:1")), cuda=(STATS,)))
    assert [d.device for d in devices] == ["cuda:0", "cuda:1", "cpu"]


@pytest.mark.parametrize("device", ["cuda:²", "cuda:١", "cuda:", "cuda:123", "gpu:0"])
def test_a_device_without_an_ascii_cuda_ordinal_has_none_and_its_parts_are_still_shown(device: str) -> None:
    tensors = TensorMemory(device, weights_bytes=100, gradients_bytes=100, optimizer_bytes=200)
    assert tensors.cuda_index is None
    (shown,) = device_memory(ProbeReport(PROBE_OK, tensors=(tensors,), cuda=(STATS,)))
    assert (shown.device, shown.gpu_index, shown.weights) == (device, None, 100)


def test_a_real_h100_jobs_parts_match_torch_and_add_up_to_nvidia_smis_figure() -> None:
    # Read on an H100 80GB HBM3 (driver 580.159.04, torch 2.11.0+cu130) under `gputop run`: a small CNN, batch 128,
    # fp32, AdamW, no DataLoader. The probe's figures; torch's own in the job at that moment: allocated
    # 100,877,312 after zero_grad (the probe reads before it, with the 2,514,848 bytes of gradients), reserved
    # 5,584,715,776, peak allocated 2,792,295,936; nvidia-smi --query-compute-apps: 6084 MiB.
    stats = CudaMemory(
        device=0,
        gpu_index=0,
        allocated_bytes=103_393_280,
        reserved_bytes=5_584_715_776,
        allocated_peak_bytes=2_792_295_936,
        reserved_peak_bytes=5_584_715_776,
        nvml_process_bytes=6_379_536_384,
    )
    tensors = TensorMemory("cuda:0", 628_712, 2_514_848, 2_514_848, 5_029_696, (("float32", 2_514_848),), 103_393_280)

    (device,) = device_memory(ProbeReport(PROBE_OK, cuda=(stats,), tensors=(tensors,)))

    assert device.weights == 628_712 * 4
    assert device.optimizer == 2 * 628_712 * 4  # AdamW's two moments; its step counters live on the CPU
    assert device.activations == 2_792_295_936 - 103_393_280
    assert device.cache == 5_584_715_776 - 2_792_295_936
    assert device.outside == 794_820_608  # the CUDA context and libraries: 758 MiB, not the 512 MiB often assumed
    assert device.total == 6084 * 2**20
