"""Fake-driver states of GPUs partitioned with MIG, shared by the collector tests, the CLI tests and screenshots."""

from __future__ import annotations

from tests.fakenvml.state import FakeGpu, FakeMigInstance, FakeMigProcess, FakeState
from tests.machines import GIB, h100

MIB = 1024**2


def h100_mig(index: int = 0, **overrides: object) -> FakeGpu:
    """An H100 in MIG mode: a 3g.40gb instance with a training process (GI 1, slot 0), a 2g.20gb one with two
    (GI 5, slot 1), an idle 1g.10gb (GI 13, slot 2); slots 3 to 6 are empty. GPM answers per instance."""
    values: dict[str, object] = {"memory_used": 36 * GIB}  # the parent reports its instances' sum
    values.update(overrides)
    gpu = h100(index, mig_mode=True, util_gpu=0, util_memory=0, **values)
    gpu.mig = [
        FakeMigInstance(
            slot=0,
            gpu_instance_id=1,
            profile="3g.40gb",
            uuid=f"MIG-0a1b2c3d-0000-4000-8000-{index:010d}00",
            multiprocessor_count=60,
            memory_total=40 * GIB - 768 * MIB,
            memory_used=30 * GIB,
            gpm_sm_util=71.5,
            gpm_any_tensor_util=48.0,
            processes=[FakeMigProcess(pid=4242, used_memory=29 * GIB)],
        ),
        FakeMigInstance(
            slot=1,
            gpu_instance_id=5,
            profile="2g.20gb",
            uuid=f"MIG-0a1b2c3d-0000-4000-8000-{index:010d}01",
            multiprocessor_count=32,
            memory_total=20 * GIB - 512 * MIB,
            memory_used=6 * GIB,
            gpm_sm_util=12.0,
            gpm_any_tensor_util=3.5,
            processes=[
                FakeMigProcess(pid=5151, used_memory=3 * GIB),
                FakeMigProcess(pid=5152, used_memory=2 * GIB + 512 * MIB),
            ],
        ),
        FakeMigInstance(
            slot=2,
            gpu_instance_id=13,
            profile="1g.10gb",
            uuid=f"MIG-0a1b2c3d-0000-4000-8000-{index:010d}02",
            multiprocessor_count=16,
            memory_total=10 * GIB - 256 * MIB,
            memory_used=0,
        ),
    ]
    return gpu


def a100_mig(index: int = 0, **overrides: object) -> FakeGpu:
    """An A100 40GB in MIG mode (Ampere: no GPM), two instances with a process each."""
    values: dict[str, object] = {
        "name": "NVIDIA A100-SXM4-40GB",
        "memory_total": 40 * GIB,
        "memory_used": 10 * GIB,
        "multiprocessor_count": 108,
        "gpm_supported": False,
        "architecture": 7,
    }
    values.update(overrides)
    gpu = h100(index, mig_mode=True, util_gpu=0, util_memory=0, **values)
    gpu.mig = [
        FakeMigInstance(
            slot=0,
            gpu_instance_id=1,
            profile="3g.20gb",
            uuid=f"MIG-a100a100-0000-4000-8000-{index:010d}00",
            multiprocessor_count=42,
            memory_total=20 * GIB - 256 * MIB,
            memory_used=9 * GIB,
            processes=[FakeMigProcess(pid=7001, used_memory=8 * GIB)],
        ),
        FakeMigInstance(
            slot=2,
            gpu_instance_id=2,
            profile="3g.20gb",
            uuid=f"MIG-a100a100-0000-4000-8000-{index:010d}02",
            multiprocessor_count=42,
            memory_total=20 * GIB - 256 * MIB,
            memory_used=1 * GIB,
            processes=[FakeMigProcess(pid=7002, used_memory=1 * GIB - 64 * MIB)],
        ),
    ]
    return gpu


def mig_box(privileged: bool = True, **options: object) -> FakeState:
    """One H100 in MIG mode next to one that is not."""
    return FakeState(gpus=[h100_mig(0), h100(1)], privileged=privileged, **options)  # type: ignore[arg-type]
