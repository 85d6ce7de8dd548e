"""Fixed training jobs for the training panel and the advisor panel: one GPU, four DataLoader workers, the probe.

``starved_job`` waits for its data half of each step, pins nothing and restarts its workers every epoch, which is
what the advisor is for; ``fed_job`` is the same job healthy. Both are pure functions of the tick time, like
``scenes``, and go through ``scenes.history`` for their sparklines and the advisor's windows.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gputop.model import (
    COMPUTE,
    EVIDENCE_PROBE,
    EVIDENCE_WORKERS,
    INFO,
    PHASES,
    PIN_OFF,
    PIN_ON,
    PROBE_OK,
    SOURCE_BOTH,
    WARNING,
    Advice,
    CudaMemory,
    GpuProcess,
    HostInfo,
    HostProcess,
    LoaderConfig,
    LoaderView,
    MainThread,
    Phase,
    PinMemoryStatus,
    PinnedHostMemory,
    ProbeReport,
    Snapshot,
    StepAnatomy,
    StepClock,
    StepCost,
    SyncSite,
    TensorMemory,
    TrainingView,
    Worker,
)
from tests.factories import host_info
from tests.ui import scenes

JOB_PID = 48213
WORKERS = 4
BATCH = 64
EPOCH_S = 40.0
MEAN_STEPS_PER_S = 7.4
"""Batches count at this rate: the steps/s of a tick vary, the running total of batches only grows."""
STARTED = scenes.T0 - 1812
COMMAND = "python train.py --data /datasets/imagenet --batch-size 64 --workers 4"
GIB = scenes.GIB


def host(t: float) -> HostInfo:
    per_core = tuple(round(60 + 35 * math.sin(t / 13 + core), 1) for core in range(16))
    return host_info(
        scenes.HOSTNAME, per_core=per_core, load_average=(9.1, 8.7, 8.2), memory_gib=251, used_gib=71, swap_gib=8
    )


def _epoch(t: float) -> tuple[int, float]:
    """The epoch running at ``t`` (counting from 1) and when it started."""
    since_start = t - STARTED
    epoch = int(since_start // EPOCH_S) + 1
    return epoch, STARTED + (epoch - 1) * EPOCH_S


def loader_view(t: float, wait: float, steps: float) -> LoaderView:
    """A persistent, pinned DataLoader's numbers at ``t``: what a healthy rank's probe reports."""
    return _loader(t, wait, steps, persistent=True, pin=True)


def _loader(t: float, wait: float, steps: float, persistent: bool, pin: bool) -> LoaderView:
    epoch, _ = _epoch(t)
    config = LoaderConfig(
        batch_size=BATCH,
        num_workers=WORKERS,
        pin_memory=pin,
        prefetch_factor=2,
        persistent_workers=persistent,
        start_method="fork",
    )
    return LoaderView(
        loader_id=1,
        requested=config,
        effective=config,
        passes=epoch if not persistent else 1,
        batches=int((t - STARTED) * MEAN_STEPS_PER_S),
        window_s=10.0,
        window_batches=int(10 * steps),
        data_wait_share=wait,
        steps_per_s=steps,
        samples_per_s=steps * BATCH,
        last_batch_age_s=0.04,
        pass_start_s=4.6 if not persistent else 1.2,
    )


def _workers(t: float, cpu: float, status: str, persistent: bool, parent: int) -> tuple[Worker, ...]:
    epoch, began = _epoch(t)
    first = parent + 100 + (0 if persistent else (epoch % 50) * 10)
    born = STARTED + 2 if persistent else began
    age = t - born
    return tuple(
        Worker(
            host=HostProcess(
                pid=first + n,
                ppid=parent,
                user="alice",
                name="pt_data_worker",
                command=COMMAND,
                cpu_percent=round(cpu + 3 * math.sin(t / 5 + n), 1),
                rss_bytes=int((3.1 + 0.05 * n) * GIB),
                start_time=t - age,
                status=status,
                num_threads=3,
            ),
            worker_id=n,
            uss_bytes=int((410 + 12 * n) * 1024**2),
            age_s=age,
        )
        for n in range(WORKERS)
    )


def _job(t: float, busy: float, view: TrainingView, gpu_memory: int) -> Snapshot:
    gpu = replace(
        scenes.gpu(0, t),
        utilization_gpu_percent=busy,
        sm_activity_percent=round(busy * 0.7),
        memory_used_bytes=gpu_memory + GIB,
        memory_free_bytes=79 * GIB - gpu_memory,
        throttle_reasons=(),
        temperature_c=58.0,
        power_w=310.0 + busy * 3,
        pcie_rx_bytes_per_s=410 * 1024**2,
    )
    job = GpuProcess(
        pid=view.pid,
        gpu_index=0,
        kind=COMPUTE,
        gpu_memory_bytes=gpu_memory,
        sm_percent=round(busy * 0.8),
        host=HostProcess(
            pid=view.pid,
            user="alice",
            name="python",
            command=COMMAND,
            cpu_percent=24.0,
            rss_bytes=7 * GIB,
            start_time=STARTED,
            status="sleeping",
        ),
    )
    hosts = [HostProcess(view.pid, 3001, True, "alice", "python", COMMAND, 24.0, 7 * GIB, STARTED, "sleeping", 38)]
    hosts += [w.host for w in view.workers]
    return Snapshot(t, host(t), scenes.DRIVER, (gpu,), (job,), tuple(hosts), view.pid, training=(view,))


def _cuda(allocated_gib: float, peak_gib: float, reserved_gib: float, nvml_gib: float) -> CudaMemory:
    """The allocator's figures at a batch boundary (``allocated``: what persists across steps) and NVML's."""
    return CudaMemory(
        device=0,
        uuid="GPU-6a1b2c3d-0000-4000-8000-000000000000",
        gpu_index=0,
        allocated_bytes=int(allocated_gib * GIB),
        reserved_bytes=int(reserved_gib * GIB),
        active_bytes=int(allocated_gib * GIB),
        allocated_peak_bytes=int(peak_gib * GIB),
        reserved_peak_bytes=int((reserved_gib + 2) * GIB),
        num_alloc_retries=0,
        num_ooms=0,
        nvml_process_bytes=int(nvml_gib * GIB),
    )


def _tensors(parameters: int, state_per_weight: int, other_gib: float) -> TensorMemory:
    """A float32 model's weights, gradients and ``state_per_weight`` optimizer tensors of the same size (2 for
    AdamW), counted right after a step; ``other_gib`` more persists (buffers, the batch)."""
    weights = parameters * 4
    return TensorMemory(
        "cuda:0",
        parameters=parameters,
        weights_bytes=weights,
        gradients_bytes=weights,
        optimizer_bytes=state_per_weight * weights,
        weight_dtypes=(("float32", weights),),
        allocated_after_step_bytes=(2 + state_per_weight) * weights + int(other_gib * GIB),
    )


STARVED_TENSORS = _tensors(304_326_632, 2, 0.2)  # ViT-L/16 under AdamW
FED_TENSORS = _tensors(3_190_000_000, 2, 0.6)  # a 3.2 B-parameter model under AdamW


def starved_job(t: float = scenes.T0, pid: int = JOB_PID) -> Snapshot:
    """Four CPU-bound workers that cannot keep up: the loop waits for data about 55% of each step, the GPU is
    busy under half the time, batches are not pinned, and the workers are started anew every epoch."""
    wait = round(0.55 + 0.06 * math.sin(t / 11), 3)
    steps = round(7.4 - 1.2 * math.sin(t / 11), 2)
    view = TrainingView(
        pid=pid,
        name="python",
        workers=_workers(t, 96.0, "running", persistent=False, parent=pid),
        worker_start_method="fork",
        workers_cpu_percent=384.0 + round(4 * math.sin(t / 7), 1),
        usable_cpu_count=16,
        workers_replaced=_epoch(t)[0] - 1,
        pin_memory=PinMemoryStatus(PIN_OFF, "4 workers and no pt_data_pin thread", "threads"),
        main_thread=MainThread("sleeping", "do_sys_poll", 21.0, 0.22, "waiting"),
        probe=ProbeReport(
            PROBE_OK,
            age_s=0.3,
            torch_version="2.5.1+cu124",
            loaders=(_loader(t, wait, steps, persistent=False, pin=False),),
            cuda=(_cuda(STARVED_TENSORS.allocated_after_step_bytes / GIB, 21.4, 24.0, 25.1),),
            tensors=(STARVED_TENSORS,),
            optimizers=("AdamW",),
            tensors_age_s=2.1,
        ),
        evidence=(EVIDENCE_PROBE, EVIDENCE_WORKERS),
    )
    busy = round(44 + 8 * math.sin(t / 9))
    return _job(t, busy, view, int(25.1 * GIB))


def fed_job(t: float = scenes.T0, pid: int = JOB_PID) -> Snapshot:
    """The same job well fed: data wait 2%, the GPU busy 96% of the time, pinned batches, persistent workers."""
    view = TrainingView(
        pid=pid,
        name="python",
        workers=_workers(t, 41.0, "sleeping", persistent=True, parent=pid),
        worker_start_method="fork",
        workers_cpu_percent=164.0,
        usable_cpu_count=16,
        pin_memory=PinMemoryStatus(PIN_ON, f"thread pt_data_pin (TID {pid + 7}) in PID {pid}", "threads"),
        main_thread=MainThread("running", None, 97.0, 0.96, "running"),
        probe=ProbeReport(
            PROBE_OK,
            age_s=0.2,
            torch_version="2.5.1+cu124",
            loaders=(_loader(t, 0.02, 11.8, persistent=True, pin=True),),
            cuda=(_cuda(FED_TENSORS.allocated_after_step_bytes / GIB, 64.4, 66.0, 67.3),),
            tensors=(FED_TENSORS,),
            optimizers=("AdamW",),
            tensors_age_s=3.4,
            pinned_host=PinnedHostMemory(allocated_bytes=int(1.6 * GIB), allocated_peak_bytes=int(1.9 * GIB)),
        ),
        evidence=(EVIDENCE_PROBE, EVIDENCE_WORKERS),
    )
    return _job(t, 96.0, view, int(67.3 * GIB))


OTHER_PID = 52000


def two_jobs(t: float = scenes.T0) -> Snapshot:
    """``starved_job`` and, as another process on the same GPU, ``fed_job``; no focus."""
    starved, fed = starved_job(t), fed_job(t, OTHER_PID)
    return replace(
        starved,
        processes=starved.processes + fed.processes,
        host_processes=starved.host_processes + fed.host_processes,
        training=starved.training + fed.training,
        focus_pid=None,
    )


STARVED_ADVICE = (
    Advice(
        id="data-starved",
        severity=WARNING,
        title="Input-bound: the loop waits for data 35% of each step",
        detail="the loop waits for data 35% of each step at 6.8 steps/s; 4 workers, busy on the CPU (3.8 of 16 "
        "usable cores); GPU busy 50%",
        action="Set num_workers=8 (4 now): 4 workers × step time ÷ compute time is 8 with 25% headroom.",
        pid=JOB_PID,
        since=scenes.T0 - 272,
        source=SOURCE_BOTH,
        evidence={"data_wait_share": 0.352, "steps_per_s": 6.77, "num_workers": 4, "gpu_busy_percent": 50.0},
        suggest={"num_workers": 8},
    ),
    Advice(
        id="pin-memory-off",
        severity=WARNING,
        title="pin_memory is off in a CUDA job",
        detail="4 workers and no pt_data_pin thread; the loop waits for data 58% of each step",
        action="Set pin_memory=True in the DataLoader and move batches with .to(device, non_blocking=True): pinned "
        "batches are copied by DMA at full PCIe speed while the GPU computes.",
        pid=JOB_PID,
        since=scenes.T0 - 272,
        source=SOURCE_BOTH,
        evidence={"pin_memory": "off", "data_wait_share": 0.582, "pcie_rx_bytes_per_s": 429916160},
        suggest={"pin_memory": True},
    ),
    Advice(
        id="persistent-workers-off",
        severity=INFO,
        title="Workers restart every epoch: 10% of the time goes to starting them",
        detail="2 epochs started in 90 s, each with new workers; the last one's first batch came 4.60 s after it "
        "started, against 0.122 s per batch",
        action="Set persistent_workers=True: the workers then live across epochs instead of being started again.",
        pid=JOB_PID,
        since=scenes.T0 - 272,
        source=SOURCE_BOTH,
        evidence={"epochs": 2, "pass_start_s": 4.6, "startup_share": 0.1},
        suggest={"persistent_workers": True},
    ),
)
"""What the advisor said about ``starved_job`` when these pictures were made. The snapshot images show these
rather than the live advisor's, so that rewording a rule does not redraw the dashboard's pictures."""


class FixedAdvisor:
    """The ``Advisor``'s interface, always with the same findings."""

    def __init__(self, advice: tuple[Advice, ...] = STARVED_ADVICE) -> None:
        self.advice = advice

    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        return self.advice


# -- the step's anatomy --------------------------------------------------------------------------------------------

CREATED_AT = "train.py:41"
STEP_FLOPS = 11.8e12
"""ViT-L/16 at 224×224: about 61.6 GFLOP per image forward, three times that with the backward, 64 images."""
H100_BF16_TFLOPS = 989.0
PEAK_SOURCE = "NVIDIA H100 SXM datasheet, dense bf16"
STARVED_SHARES: tuple[tuple[Phase, float], ...] = (
    ("h2d", 0.10),
    ("forward", 0.29),
    ("backward", 0.43),
    ("optimizer", 0.10),
    ("other", 0.08),
)
"""How the starved job's step splits outside its data wait: copies from pageable memory take a tenth."""


def step_anatomy(
    step_s: float,
    wait: float,
    shares: tuple[tuple[Phase, float], ...],
    clock: StepClock = "cuda",
    batch: int = BATCH,
    **fields: object,
) -> StepAnatomy:
    """A probe's step anatomy: ``wait`` of ``step_s`` waiting for data, the rest split by ``shares``."""
    phases = (("data", wait * step_s), *((name, share * (1 - wait) * step_s) for name, share in shares))
    ordered = tuple(sorted(phases, key=lambda phase: PHASES.index(phase[0])))
    anatomy = StepAnatomy(
        boundary="DataLoader",
        clock=clock,
        steps=12_840,
        window_s=10.0,
        window_steps=round(10 / step_s),
        step_s=step_s,
        step_p95_s=step_s * 1.19,
        warmup_step_s=2.14,
        drift=1.03,
        steps_per_s=1 / step_s,
        samples_per_s=batch / step_s,
        phases_s=ordered,
    )
    return replace(anatomy, **fields)  # type: ignore[arg-type]


def _starved_step(t: float) -> StepAnatomy:
    wait = round(0.55 + 0.06 * math.sin(t / 11), 3)
    steps = round(7.4 - 1.2 * math.sin(t / 11), 2)
    return step_anatomy(
        1 / steps,
        wait,
        STARVED_SHARES,
        h2d_bytes_per_step=BATCH * 3 * 224 * 224 * 4,
        h2d_pageable_share=1.0,
        h2d_blocking_share=1.0,
        syncs_per_step=2.0,
        sync_sites=(SyncSite("train.py:57", "item", 1.0), SyncSite("train.py:63", "cpu", 1.0)),
        sync_sampled_steps=40,
        flops_per_step=STEP_FLOPS,
        flops_source="counted",
    )


def gpu_cost(step: StepAnatomy, power_w: float, batch: int = BATCH) -> StepCost:
    """What the monitor makes of a CUDA step: energy from the GPU's power, MFU against an H100's bf16 peak."""
    assert step.steps_per_s is not None and step.flops_per_step is not None
    achieved = step.flops_per_step * step.steps_per_s / 1e12
    return StepCost(
        energy_per_step_j=power_w / step.steps_per_s,
        energy_per_sample_j=power_w / step.steps_per_s / batch,
        power_w=power_w,
        achieved_tflops=achieved,
        peak_tflops=H100_BF16_TFLOPS,
        peak_source=PEAK_SOURCE,
        precision="bf16",
        mfu=achieved / H100_BF16_TFLOPS,
    )


def _with_step(snap: Snapshot, step: StepAnatomy, cost: StepCost | None) -> Snapshot:
    """The job with its step anatomy, where it built its loader, and what a worker takes to make a batch: its
    workers, starved, deliver the batches the loop takes, one each in turn."""
    view = snap.training[0]
    loaders = tuple(
        replace(loader, created_at=CREATED_AT, worker_batch_s=_worker_batch_s(loader)) for loader in view.probe.loaders
    )
    probe = replace(view.probe, loaders=loaders, step=step)
    return replace(snap, training=(replace(view, probe=probe, cost=cost),))


def _worker_batch_s(loader: LoaderView) -> float | None:
    workers, steps = loader.effective.num_workers, loader.steps_per_s
    return round(workers / steps, 4) if workers and steps else None


def stepped_job(t: float = scenes.T0, pid: int = JOB_PID) -> Snapshot:
    """``starved_job`` with the probe's step anatomy and the monitor's cost of a step: the data wait is the
    longest phase, copies come from pageable memory, two syncs a step, MFU under 10%."""
    snap = starved_job(t, pid)
    step = _starved_step(t)
    power = snap.gpus[0].power_w or 0.0
    return _with_step(snap, step, gpu_cost(step, power))


CPU_SHARES: tuple[tuple[Phase, float], ...] = (
    ("forward", 0.31),
    ("backward", 0.46),
    ("optimizer", 0.15),
    ("other", 0.08),
)
CPU_COST = StepCost(
    unavailable={
        "mfu": "a CPU job: no GPU peak to compare with",
        "achieved_tflops": "a CPU job: no GPU peak to compare with",
        "energy_per_step_j": "the job uses no GPU: NVML's energy counter is per GPU",
        "energy_per_sample_j": "the job uses no GPU: NVML's energy counter is per GPU",
    }
)


def cpu_stepped_job(t: float = scenes.T0, pid: int = JOB_PID) -> Snapshot:
    """The fed job run on the CPU: phases on the host's clock, no copies to a GPU, no syncs, no MFU, no energy."""
    snap = fed_job(t, pid)
    step = step_anatomy(
        0.4,
        0.03,
        CPU_SHARES,
        clock="host",
        unavailable={"syncs_per_step": "no CUDA: nothing to wait for", "flops_per_step": "counted on CUDA only"},
    )
    view = replace(snap.training[0], probe=replace(snap.training[0].probe, cuda=(), tensors=()))
    return _with_step(replace(snap, processes=(), training=(view,)), step, CPU_COST)
