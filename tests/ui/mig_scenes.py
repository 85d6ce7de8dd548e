"""A GPU partitioned with MIG next to one that is not: the dashboard's MIG scene, a pure function of the time."""

from __future__ import annotations

import math
from dataclasses import replace

from gputop.model import (
    COMPUTE,
    MIG_ENABLED,
    NO_PERMISSION,
    NOT_IN_MIG_MODE,
    UNSUPPORTED,
    Gpu,
    GpuProcess,
    HostProcess,
    MigInstance,
    Snapshot,
    frozen_reasons,
)
from tests.ui import scenes
from tests.ui.scenes import DRIVER, GIB, T0, gpu, host, host_processes

MIB = 1024**2
NOTEBOOK_PIDS = (5120, 5121)
NO_UTILIZATION = frozen_reasons(
    {
        "fan_percent": "unsupported",
        "utilization_gpu_percent": NOT_IN_MIG_MODE,
        "utilization_memory_percent": NOT_IN_MIG_MODE,
        "sm_activity_percent": NOT_IN_MIG_MODE,
    }
)
NO_SAMPLES = frozen_reasons({"sm_percent": NOT_IN_MIG_MODE, "memory_bandwidth_percent": NOT_IN_MIG_MODE})


def instances(t: float) -> tuple[MigInstance, ...]:
    """A busy 3g.40gb (a training rank), a 2g.20gb with two notebooks, an idle 1g.10gb."""
    wave = math.sin(t / 7)
    return (
        MigInstance(0, 1, 0, "3g.40gb", "MIG-0a1b2c3d-0000-4000-8000-000000000000", 60, 40 * GIB - 768 * MIB,
                    31 * GIB, round(78 + 8 * wave, 1), round(52 + 6 * wave, 1)),
        MigInstance(1, 5, 0, "2g.20gb", "MIG-0a1b2c3d-0000-4000-8000-000000000001", 32, 20 * GIB - 512 * MIB,
                    6 * GIB, 9.5, 2.0),
        MigInstance(2, 13, 0, "1g.10gb", "MIG-0a1b2c3d-0000-4000-8000-000000000002", 16, 10 * GIB - 256 * MIB,
                    0, 0.0, 0.0),
    )  # fmt: skip


def mig_gpu(t: float) -> Gpu:
    parts = instances(t)
    used = sum(m.memory_used_bytes or 0 for m in parts)
    return replace(
        gpu(0, t),
        memory_used_bytes=used,
        memory_free_bytes=80 * GIB - used,
        utilization_gpu_percent=None,
        utilization_memory_percent=None,
        sm_activity_percent=None,
        power_w=402.0,
        throttle_reasons=(),
        unavailable=NO_UTILIZATION,
        mig_mode=MIG_ENABLED,
        mig_pending_mode=MIG_ENABLED,
        mig=parts,
    )


def _notebook(pid: int, n: int) -> HostProcess:
    return HostProcess(
        pid,
        visible=True,
        user="bob",
        name="python",
        command=f"python -m ipykernel_launcher -f /home/bob/.local/share/jupyter/runtime/kernel-{n}.json",
        cpu_percent=12.0 + n,
        rss_bytes=3 * GIB,
        start_time=T0 - 5400,
        status="sleeping",
    )


def mig_node(t: float = T0) -> Snapshot:
    """GPU 0 (an H100) in MIG mode with three instances; GPU 1 whole, training."""
    rank = scenes.gpu_processes(t, [1])
    on_mig = (
        replace(scenes.gpu_processes(t, [0])[0], gpu_memory_bytes=30 * GIB, sm_percent=None,
                memory_bandwidth_percent=None, unavailable=NO_SAMPLES, mig_index=0, gpu_instance_id=1,
                compute_instance_id=0),
        GpuProcess(NOTEBOOK_PIDS[0], 0, COMPUTE, 3 * GIB, unavailable=NO_SAMPLES, host=_notebook(NOTEBOOK_PIDS[0], 1),
                   mig_index=1, gpu_instance_id=5, compute_instance_id=0),
        GpuProcess(NOTEBOOK_PIDS[1], 0, COMPUTE, 2 * GIB + 512 * MIB, unavailable=NO_SAMPLES,
                   host=_notebook(NOTEBOOK_PIDS[1], 2), mig_index=1, gpu_instance_id=5, compute_instance_id=0),
    )  # fmt: skip
    processes = on_mig + rank
    hosts = host_processes(processes)
    return Snapshot(t, host(t), DRIVER, (mig_gpu(t), gpu(1, t)), processes, hosts)


AMPERE_MEMORY_REFUSED = frozen_reasons(
    {
        **NO_UTILIZATION,
        **{name: NO_PERMISSION for name in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes")},
    }
)
NO_GPM = frozen_reasons({"sm_activity_percent": UNSUPPORTED, "tensor_activity_percent": UNSUPPORTED})
AMPERE_PIDS = (7001, 7002)


def ampere_gpu(t: float) -> Gpu:
    """An A100 in MIG mode as a user who is not root sees it: NVML refuses the whole GPU's memory (each instance's
    is read), and without GPM (Hopper and newer) no instance has SM or tensor activity."""
    parts = (
        MigInstance(0, 1, 0, "3g.20gb", "MIG-a100a100-0000-4000-8000-000000000000", 42, 20 * GIB - 256 * MIB,
                    9 * GIB, unavailable=NO_GPM),
        MigInstance(2, 2, 0, "3g.20gb", "MIG-a100a100-0000-4000-8000-000000000002", 42, 20 * GIB - 256 * MIB,
                    1 * GIB, unavailable=NO_GPM),
    )  # fmt: skip
    return replace(
        mig_gpu(t),
        name="NVIDIA A100-SXM4-40GB",
        memory_total_bytes=None,
        memory_used_bytes=None,
        memory_free_bytes=None,
        memory_reserved_bytes=None,
        power_w=212.0,
        power_limit_w=400.0,
        unavailable=AMPERE_MEMORY_REFUSED,
        mig=parts,
    )


def ampere_node(t: float = T0) -> Snapshot:
    """GPU 0, an A100 in MIG mode seen by bob (not root), a notebook on each instance; GPU 1 whole, training."""
    on_mig = tuple(
        GpuProcess(pid, 0, COMPUTE, used, unavailable=NO_SAMPLES, host=_notebook(pid, n), mig_index=slot,
                   gpu_instance_id=gi, compute_instance_id=0)
        for n, (pid, slot, gi, used) in enumerate(zip(AMPERE_PIDS, (0, 2), (1, 2), (8 * GIB, 960 * MIB)))
    )  # fmt: skip
    processes = on_mig + scenes.gpu_processes(t, [1])
    return Snapshot(t, host(t), DRIVER, (ampere_gpu(t), gpu(1, t)), processes, host_processes(processes))
