"""Realistic fake-driver states shared by tests, benchmarks and screenshots."""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakenvml.state import FakeGpu, FakeProcess, FakeState

GIB = 1024**3


def h100(index: int, **overrides: object) -> FakeGpu:
    """An H100 SXM in the middle of a training step; keyword arguments override any field."""
    values: dict[str, object] = {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-6a1b2c3d-0000-4000-8000-{index:012d}",
        "memory_total": 80 * GIB,
        "memory_reserved": 512 * 1024**2,
        "memory_used": (20 + 5 * index) * GIB,
        "util_gpu": 87,
        "util_memory": 41,
        "temperature_c": 61 + index,
        "power_mw": 512_345,
        "power_limit_mw": 700_000,
        "fan_percent": 0,
        "pstate": 0,
        "clock_sm_mhz": 1755,
        "clock_mem_mhz": 2619,
        "clock_sm_max_mhz": 1980,
        "clock_mem_max_mhz": 2619,
        "pcie_tx_kbps": 1_200,
        "pcie_rx_kbps": 48_000,
        "clocks_event_reasons": 0x4,
        "ecc_uncorrected_volatile": 0,
        "gpm_supported": True,
        "gpm_sm_util": 63.5,
        "gpm_sm_occupancy": 31.0,
        "gpm_dram_bw_util": 22.0,
        "gpm_any_tensor_util": 42.0,  # a mixed-precision step keeps its tensor cores busy
        "errors": {"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"},
    }
    values.update(overrides)
    return FakeGpu(**values)  # type: ignore[arg-type]


def training_box(gpus: int, pids: Sequence[int], **gpu_overrides: object) -> FakeState:
    """``gpus`` H100s with the given PIDs spread round-robin over them as compute processes of 6 GiB each."""
    state = FakeState(gpus=[h100(i, **gpu_overrides) for i in range(gpus)])
    for n, pid in enumerate(pids):
        state.gpus[n % gpus].processes.append(FakeProcess(pid=pid, used_memory=6 * GIB + n * 1024**2))
    return state
