"""Fixed, hand-built snapshots for the dashboard's tests, snapshot images and screenshots.

Everything is a pure function of the tick number: the same hostname, clock, values and history every run, so
SVG snapshots are stable. ``ScriptedSource`` has the ``Sampler``'s interface and plays them to the app.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from gputop.model import (
    COMPUTE,
    GPU_LOST_STATE,
    GRAPHICS,
    MEASURING,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostInfo,
    HostProcess,
    Snapshot,
    frozen_reasons,
)
from tests.factories import host_info

T0 = 1_763_900_000.0
"""The clock of the last tick (12:13:20 UTC)."""
HISTORY_TICKS = 150
TICK_S = 2.0
GIB = 1024**3
HOSTNAME = "gpu-node-07"
DRIVER = DriverInfo("ok", driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550.90.07")
NO_DRIVER = DriverInfo(
    "unavailable",
    reason=(
        "NVIDIA driver library libnvidia-ml.so.1 not found: no NVIDIA driver is installed here, "
        "or this container was started without GPU access (docker run --gpus all)"
    ),
)
TORCHRUN_PID = 4100
RANK_PIDS = tuple(range(4101, 4109))
NOTEBOOK_PID = 5120
XORG_PID = 1830
EVAL_PID = 6011
EVAL_COMMAND = "/home/carol/envs/eval/bin/python eval.py --ckpt /ckpt/step-12000 --tp 2"
"""Run by a virtual environment's interpreter, named by its whole path as such a command line is."""
CPU_JOB_PID = 7000
LOST_GPU_INDEX = 3
LOST_REASON = "GPU is lost (fell off the bus): it needs a reset or a reboot"
STARTED = T0 - 3 * 3600 - 25 * 60


def host(t: float) -> HostInfo:
    per_core = tuple(round(55 + 40 * math.sin(t / 17 + core * 0.7), 1) for core in range(64))
    return host_info(
        HOSTNAME, per_core=per_core, load_average=(41.32, 39.87, 35.02), memory_gib=1007, used_gib=612, swap_gib=8
    )


def _busy(t: float, index: int) -> float:
    """A training step's GPU busy %: high, with a DataLoader stall every 40 s."""
    stall = (t + 3 * index) % 40 < 4
    return 22.0 if stall else round(91 + 6 * math.sin(t / 9 + index), 0)


def gpu(index: int, t: float) -> Gpu:
    """One H100 at tick time ``t``; GPU 2 runs into its power cap, GPU 5 runs hot."""
    ramp = min(1.0, max(0.0, (t - (T0 - 290)) / 60))
    used = int((8 + ramp * (52 + 2 * index)) * GIB) + (int(ramp * 12 * GIB) if index == 3 else 0)
    busy = _busy(t, index)
    return Gpu(
        index=index,
        uuid=f"GPU-6a1b2c3d-0000-4000-8000-{index:012d}",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=80 * GIB,
        memory_used_bytes=used,
        memory_free_bytes=80 * GIB - used,
        memory_reserved_bytes=512 * 1024**2,
        utilization_gpu_percent=busy,
        utilization_memory_percent=round(busy * 0.45),
        sm_activity_percent=round(busy * 0.72),
        temperature_c=87.0 if index == 5 else 61.0 + index,
        power_w=698.0 if index == 2 else 520.0 + 9 * index,
        power_limit_w=700.0,
        fan_percent=None,
        pstate=0,
        clock_sm_mhz=1410 if index == 2 else 1755,
        clock_mem_mhz=2619,
        clock_sm_max_mhz=1980,
        clock_mem_max_mhz=2619,
        pcie_rx_bytes_per_s=48_000 * 1024,
        pcie_tx_bytes_per_s=1_200 * 1024,
        throttle_reasons=("sw_power_cap",) if index == 2 else ("sw_thermal_slowdown",) if index == 5 else ("gpu_idle",),
        ecc_uncorrected_volatile=0,
        unavailable=frozen_reasons({"fan_percent": "unsupported"}),
    )


def _rank_command(rank: int) -> str:
    return f"python -u train.py --config configs/llama3-8b.yaml --data /datasets/fineweb --rank {rank}"


def gpu_processes(t: float, gpus: Iterable[int]) -> tuple[GpuProcess, ...]:
    shown = set(gpus)
    out = []
    for rank, pid in enumerate(RANK_PIDS):
        sm = round(_busy(t, rank) * 0.7)
        memory = gpu(rank, t).memory_used_bytes or 0
        if rank == 3:
            memory -= 12 * GIB
        out.append(
            GpuProcess(
                pid,
                rank,
                COMPUTE,
                memory - GIB,
                sm,
                30.0,
                host=HostProcess(
                    pid,
                    visible=True,
                    user="alice",
                    name="python",
                    command=_rank_command(rank),
                    cpu_percent=98.0 + rank,
                    rss_bytes=14 * GIB + rank * 1024**3 // 4,
                    start_time=STARTED,
                    status="running",
                ),
            )
        )
    out.append(
        GpuProcess(
            NOTEBOOK_PID,
            3,
            COMPUTE,
            11 * GIB,
            4.0,
            1.0,
            host=HostProcess(
                NOTEBOOK_PID,
                visible=True,
                user="bob",
                name="python",
                command="python -m ipykernel_launcher -f /home/bob/.local/share/jupyter/runtime/kernel-1b2c.json",
                cpu_percent=2.0,
                rss_bytes=3 * GIB,
                start_time=T0 - 2 * 86400 - 3600,
                status="sleeping",
            ),
        )
    )
    out.append(
        GpuProcess(
            XORG_PID,
            0,
            GRAPHICS,
            42 * 1024**2,
            None,
            None,
            host=HostProcess(
                XORG_PID,
                visible=True,
                user="root",
                name="Xorg",
                command="/usr/lib/xorg/Xorg vt7 -displayfd 3",
                cpu_percent=0.0,
                rss_bytes=96 * 1024**2,
                start_time=T0 - 9 * 86400,
                status="sleeping",
            ),
            unavailable=frozen_reasons({"sm_percent": "unsupported"}),
        )
    )
    for index in (6, 7):
        out.append(
            GpuProcess(
                EVAL_PID,
                index,
                COMPUTE,
                2 * GIB + index * 1024**2,
                3.0,
                1.0,
                host=HostProcess(
                    EVAL_PID,
                    visible=True,
                    user="carol",
                    name="python",
                    command=EVAL_COMMAND,
                    cpu_percent=35.0,
                    rss_bytes=6 * GIB,
                    start_time=T0 - 1200,
                    status="running",
                ),
            )
        )
    return tuple(p for p in out if p.gpu_index in shown)


def host_processes(processes: Iterable[GpuProcess], extra: Iterable[HostProcess] = ()) -> tuple[HostProcess, ...]:
    """The GPU processes' host side, torchrun above the ranks and two DataLoader workers under each rank."""
    hosts: dict[int, HostProcess] = {}
    for p in processes:
        ppid = TORCHRUN_PID if p.pid in RANK_PIDS else 1
        hosts[p.pid] = replace(p.host or HostProcess(p.pid), ppid=ppid, num_threads=40 if p.pid in RANK_PIDS else 6)
    if any(pid in hosts for pid in RANK_PIDS):
        hosts[TORCHRUN_PID] = HostProcess(
            TORCHRUN_PID,
            4000,
            True,
            "alice",
            "torchrun",
            "torchrun --nproc-per-node 8 train.py --config configs/llama3-8b.yaml",
            0.5,
            180 * 1024**2,
            STARTED - 5,
            "sleeping",
            4,
        )
    for rank, pid in enumerate(RANK_PIDS):
        if pid in hosts:
            for n in range(2):
                worker = 4200 + rank * 10 + n
                hosts[worker] = HostProcess(
                    worker,
                    pid,
                    True,
                    "alice",
                    "pt_data_worker",
                    _rank_command(rank),
                    61.0 + n,
                    2 * GIB,
                    STARTED + 30,
                    "running",
                    3,
                )
    for h in extra:
        hosts[h.pid] = h
    return tuple(hosts[pid] for pid in sorted(hosts))


def training_node(t: float = T0, lost: Iterable[int] = (), focus_pid: int | None = None) -> Snapshot:
    """Eight H100s under a torchrun job, a notebook, a desktop and a two-GPU eval; ``lost`` GPUs fell off."""
    lost = set(lost)
    gpus = tuple(
        Gpu(i, f"GPU-6a1b2c3d-0000-4000-8000-{i:012d}", "NVIDIA H100 80GB HBM3", GPU_LOST_STATE, LOST_REASON)
        if i in lost
        else gpu(i, t)
        for i in range(8)
    )
    processes = gpu_processes(t, [i for i in range(8) if i not in lost])
    return Snapshot(t, host(t), DRIVER, gpus, processes, host_processes(processes, _cpu_job(t)), focus_pid)


REAL_WORK_GPUS = (
    # SM, occupancy, tensor, DRAM, FP32, FP16: what GPM says of the work behind each GPU's BUSY
    (16.0, 9.0, 2.0, 11.0, 6.0, 1.0),  # launch-bound: one small kernel at a time reads BUSY ~95 %
    (88.0, 46.0, 63.0, 58.0, 12.0, 4.0),  # a bf16 step: tensor cores busy
    (74.0, 38.0, 0.0, 41.0, 55.0, 0.0),  # fp32 matmuls: tensor cores idle
)


NVLINK = ("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")


def real_work_gpu(index: int, t: float) -> Gpu:
    """``gpu(index, t)`` with GPM's other metrics, which move with its busy % like its SM activity does."""
    base = gpu(index, t)
    sm, occupancy, tensor, dram, fp32, fp16 = REAL_WORK_GPUS[index % len(REAL_WORK_GPUS)]
    scale = (base.utilization_gpu_percent or 0) / 95
    return replace(
        base,
        sm_activity_percent=round(sm * scale, 1),
        sm_occupancy_percent=round(occupancy * scale, 1),
        tensor_activity_percent=round(tensor * scale, 1),
        dram_bandwidth_percent=round(dram * scale, 1),
        fp64_activity_percent=0.0,
        fp32_activity_percent=round(fp32 * scale, 1),
        fp16_activity_percent=round(fp16 * scale, 1),
        gpm_pcie_tx_bytes_per_s=1_200 * 1024,
        gpm_pcie_rx_bytes_per_s=48_000 * 1024,
        nvlink_tx_bytes_per_s=None if index >= 4 else 92 * GIB,
        nvlink_rx_bytes_per_s=None if index >= 4 else 91 * GIB,
        unavailable=frozen_reasons(
            {**base.unavailable, **(dict.fromkeys(NVLINK, "unsupported") if index >= 4 else {})}
        ),
    )


def real_work_node(t: float = T0, count: int = 8) -> Snapshot:
    """``training_node`` whose first ``count`` H100s report GPM's occupancy, tensor, DRAM and FP pipe activity:
    GPU 0 (and 3, 6) launch-bound, 1 (4, 7) on tensor cores, 2 (5) on FP32 pipes with its tensor cores idle."""
    snap = training_node(t)
    return replace(
        snap,
        gpus=tuple(real_work_gpu(g.index, t) for g in snap.gpus[:count]),
        processes=tuple(p for p in snap.processes if p.gpu_index < count),
    )


MANY_GPUS = 64
SWEEP_PID = 9000


def many_gpus_node(t: float = T0, count: int = MANY_GPUS) -> Snapshot:
    """``training_node`` on a machine of ``count`` H100s: the torchrun job and the others on GPUs 0-7, and one
    hyperparameter-sweep trial (``dave``) on each GPU after them."""
    snap = training_node(t)
    trials = tuple(
        GpuProcess(
            SWEEP_PID + i,
            i,
            COMPUTE,
            int((20 + i % 7) * GIB),
            round(_busy(t, i) * 0.6),
            20.0,
            host=HostProcess(
                SWEEP_PID + i,
                visible=True,
                user="dave",
                name="python",
                command=f"python sweep.py --trial {i} --lr 3e-4",
                cpu_percent=97.0,
                rss_bytes=8 * GIB,
                start_time=T0 - 1800,
                status="running",
            ),
        )
        for i in range(8, count)
    )
    processes = snap.processes + trials
    return replace(
        snap,
        # GPUs 8 on read like GPUs 0-7 do (``gpu`` grows memory, heat and power with the index).
        gpus=tuple(replace(gpu(i % 8, t), index=i, uuid=f"GPU-6a1b2c3d-0000-4000-8000-{i:012d}") for i in range(count)),
        processes=processes,
        host_processes=host_processes(processes, _cpu_job(t)),
    )


def _cpu_job(t: float) -> tuple[HostProcess, ...]:
    """A CPU-only preprocessing job with two children, for the GPU-less --pid view."""
    return (
        HostProcess(
            CPU_JOB_PID,
            1,
            True,
            "alice",
            "python",
            "python prepare_shards.py --out /datasets/fineweb",
            180.0,
            5 * GIB,
            T0 - 600,
            "running",
            9,
        ),
        HostProcess(
            CPU_JOB_PID + 1,
            CPU_JOB_PID,
            True,
            "alice",
            "python",
            "python prepare_shards.py --worker 0",
            97.0,
            GIB,
            T0 - 590,
            "running",
            2,
        ),
        HostProcess(
            CPU_JOB_PID + 2,
            CPU_JOB_PID,
            True,
            "alice",
            "python",
            "python prepare_shards.py --worker 1",
            95.0,
            GIB,
            T0 - 590,
            "running",
            2,
        ),
    )


def no_driver(t: float = T0) -> Snapshot:
    """A machine without an NVIDIA driver: the host and the reason, nothing else."""
    return Snapshot(t, host(t), NO_DRIVER)


def first_tick(snap: Snapshot) -> Snapshot:
    """``snap`` as the first tick sees it: rates still measuring."""
    measuring = frozen_reasons({"cpu_percent": MEASURING})
    return replace(
        snap,
        processes=tuple(replace(p, cpu_percent=None, unavailable=measuring) for p in snap.processes),
        host=replace(snap.host, cpu_percent=None, cpu_percent_per_core=()),
    )


def history(make: Callable[[float], Snapshot], ticks: int = HISTORY_TICKS) -> list[Snapshot]:
    """``ticks`` snapshots ``TICK_S`` apart, the last at ``T0``."""
    return [make(T0 - (ticks - 1 - n) * TICK_S) for n in range(ticks)]


class ScriptedSource:
    """The ``Sampler``'s interface over prepared snapshots: played on ``start``, more with ``push``."""

    def __init__(self, snapshots: Iterable[Snapshot] = ()) -> None:
        self.snapshots = list(snapshots)
        self.subscribers: list[Callable[[Snapshot], None]] = []
        self.intervals: list[float] = []
        self.started = False
        self.stopped = False

    def subscribe(self, callback: Callable[[Snapshot], None]) -> None:
        self.subscribers.append(callback)

    def start(self) -> None:
        self.started = True
        for snap in self.snapshots:
            self.push(snap)

    def stop(self) -> None:
        self.stopped = True

    def set_interval(self, interval_s: float) -> None:
        self.intervals.append(interval_s)

    def push(self, snap: Snapshot) -> None:
        for callback in self.subscribers:
            callback(snap)
