"""A torchrun job of four ranks on GPUs 0-3 for the job view, rank 2 the straggler: it computes twice as long per
step as the others, which wait for it in the all-reduce about half of each step. A pure function of the tick
time, like ``scenes``; ``ADVICE`` is what the advisor says of it (fixed, as ``training_scenes.STARVED_ADVICE``)."""

from __future__ import annotations

import math
from dataclasses import replace

from gputop.jobs import find_jobs
from gputop.model import (
    COMPUTE,
    EVIDENCE_PROBE,
    EVIDENCE_RANK,
    EVIDENCE_WORKERS,
    INFO,
    PIN_ON,
    PROBE_OK,
    ROLE_TORCHRUN_AGENT,
    SOURCE_BOTH,
    SOURCE_PROBE,
    WARNING,
    Advice,
    GpuProcess,
    HostProcess,
    Launch,
    LoaderConfig,
    LoaderView,
    MainThread,
    Phase,
    PinMemoryStatus,
    ProbeReport,
    Snapshot,
    StepAnatomy,
    StepCost,
    TrainingView,
    Worker,
)
from tests.ui import scenes

AGENT_PID = 9100
RANK_PIDS = (9101, 9102, 9103, 9104)
STRAGGLER = 2
STRAGGLER_PID = RANK_PIDS[STRAGGLER]
WORKERS = 3
STEPS_PER_S = 3.1
COMMAND = "python train.py --config configs/resnet152.yaml"
LAUNCH = Launch(world_size=4, local_world_size=4, run_id="resnet-ft", master_addr="127.0.0.1", master_port=29500)
STARTED = scenes.T0 - 2 * 3600


def _rank_view(rank: int, t: float) -> TrainingView:
    pid = RANK_PIDS[rank]
    slow = rank == STRAGGLER
    busy = 0.93 if slow else round(0.44 + 0.02 * rank, 2)
    wait = 0.03 if slow else round(0.04 + 0.01 * math.sin(t / 7 + rank), 3)
    workers = tuple(
        Worker(
            HostProcess(pid * 10 + n, pid, True, "alice", "pt_data_worker", COMMAND, 38.0 + 2 * n, 2 << 30, STARTED),
            worker_id=n,
            age_s=t - STARTED,
        )
        for n in range(WORKERS)
    )
    config = LoaderConfig(batch_size=64, num_workers=WORKERS, pin_memory=True, persistent_workers=True)
    loader = LoaderView(
        1,
        config,
        config,
        tuple(w.pid for w in workers),
        passes=3,
        batches=int((t - STARTED) * STEPS_PER_S),
        window_s=10.0,
        data_wait_share=wait,
        steps_per_s=round(STEPS_PER_S + 0.01 * math.sin(t / 5), 2),
        samples_per_s=STEPS_PER_S * 64,
        last_batch_age_s=0.1,
    )
    return TrainingView(
        pid=pid,
        name="python",
        workers=workers,
        worker_start_method="fork",
        workers_cpu_percent=sum(w.host.cpu_percent or 0 for w in workers),
        usable_cpu_count=64,
        pin_memory=PinMemoryStatus(PIN_ON, f"thread pt_data_pin in PID {pid}", "threads"),
        main_thread=MainThread(
            "running" if slow else "sleeping", None, busy * 100, busy, "running" if slow else "mixed"
        ),
        probe=ProbeReport(PROBE_OK, age_s=0.4, rank=rank, local_rank=rank, world_size=4, loaders=(loader,)),
        launch=replace(LAUNCH, rank=rank, local_rank=rank),
        evidence=(EVIDENCE_PROBE, EVIDENCE_WORKERS),
    )


def torchrun_job(t: float = scenes.T0) -> Snapshot:
    """The four ranks under their torchrun agent, each on its GPU; the GPUs of the ranks that wait are less busy."""
    views = tuple(_rank_view(rank, t) for rank in range(4))
    agent = TrainingView(AGENT_PID, ROLE_TORCHRUN_AGENT, "torchrun", ranks=RANK_PIDS)
    gpus = tuple(
        replace(
            scenes.gpu(i, t),
            utilization_gpu_percent=97.0 if i == STRAGGLER else 61.0 + i,
            sm_activity_percent=71.0 if i == STRAGGLER else 38.0 + i,
            throttle_reasons=(),
        )
        for i in range(4)
    )
    hosts = [
        HostProcess(AGENT_PID, 1, True, "alice", "torchrun", "torchrun --nproc-per-node 4 " + COMMAND, 0.4, 1 << 28)
    ]
    processes = []
    for rank, view in enumerate(views):
        host = HostProcess(view.pid, AGENT_PID, True, "alice", "python", COMMAND, 96.0, 9 << 30, STARTED, "running")
        hosts += [host, *(w.host for w in view.workers)]
        memory = (31 if rank == STRAGGLER else 30) * scenes.GIB + rank * (1 << 28)
        processes.append(GpuProcess(view.pid, rank, COMPUTE, memory, 70.0, 30.0, host=host))
    return Snapshot(t, scenes.host(t), scenes.DRIVER, gpus, tuple(processes), tuple(hosts), training=(agent, *views))


def unprobed_job(t: float = scenes.T0) -> Snapshot:
    """The same job started without the probe: its ranks and workers seen from outside, no report from any."""
    snap = torchrun_job(t)
    training = tuple(
        v
        if v.role == ROLE_TORCHRUN_AGENT
        else replace(v, probe=ProbeReport(), evidence=(EVIDENCE_WORKERS, EVIDENCE_RANK))
        for v in snap.training
    )
    return replace(snap, training=training)


JOB_ID = find_jobs(torchrun_job())[0].id

ADVICE = (
    Advice(
        id="straggler",
        severity=WARNING,
        title="Straggler: rank 2 holds the other 3 back",
        detail="rank 2 (PID 9103, GPU 2) computes 300 ms of each step, 107% more than the others' median of 145 ms; "
        "the others wait for it 51% of each step",
        action="Look at rank 2 (PID 9103, GPU 2): its main thread is on the CPU 93% of the time, the others' 46%. "
        "The whole job runs at its pace: every step ends with the other ranks waiting for it in the gradients' "
        "all-reduce.",
        pid=STRAGGLER_PID,
        since=scenes.T0 - 120,
        source=SOURCE_BOTH,
        evidence={"rank": 2, "pid": STRAGGLER_PID, "own_step_s": 0.3, "others_own_step_s": 0.145},
        job=JOB_ID,
        pids=(STRAGGLER_PID, *(p for p in RANK_PIDS if p != STRAGGLER_PID)),
    ),
    Advice(
        id="pin-memory-off",
        severity=INFO,
        title="pin_memory is off in a CUDA job",
        detail="3 workers and no pt_data_pin thread; the loop waits for data 4% of each step",
        action="Set pin_memory=True in the DataLoader and move batches with .to(device, non_blocking=True): "
        "pinned batches are copied by DMA at full PCIe speed while the GPU computes.",
        pid=RANK_PIDS[0],
        since=scenes.T0 - 300,
        source=SOURCE_BOTH,
        suggest={"pin_memory": True},
        job=JOB_ID,
        pids=RANK_PIDS,
    ),
)


RANK_PHASES_MS: tuple[tuple[Phase, float], ...] = (
    ("data", 4.1),
    ("h2d", 2.6),
    ("forward", 61.0),
    ("backward", 118.0),
    ("optimizer", 9.4),
    ("collective", 121.0),
    ("other", 6.5),
)
"""A healthy rank's step of about 322 ms (3.1 steps/s): more than a third of it waiting in the all-reduce."""
STRAGGLER_PHASES_MS: tuple[tuple[Phase, float], ...] = (
    ("data", 4.0),
    ("h2d", 2.7),
    ("forward", 180.0),
    ("backward", 119.0),
    ("optimizer", 9.5),
    ("collective", 0.8),
    ("other", 6.2),
)
"""The straggler's: its forward takes three times the others', and it hardly waits in the all-reduce."""


STEP_FLOPS = 64e12
"""The FLOPs of a step of the ranks' model, as torch's FLOP counter would count them."""


def _rank_step(rank: int, t: float) -> StepAnatomy:
    phases = STRAGGLER_PHASES_MS if rank == STRAGGLER else RANK_PHASES_MS
    wobble = 1 + 0.01 * math.sin(t / 5 + rank)
    phases_s = tuple((name, round(ms * wobble, 1) / 1000) for name, ms in phases)
    step_s = sum(seconds for _, seconds in phases_s)
    return StepAnatomy(
        boundary="DataLoader",
        clock="cuda",
        steps=22_300,
        window_s=10.0,
        window_steps=31,
        step_s=step_s,
        step_p95_s=step_s * 1.04,
        steps_per_s=1 / step_s,
        samples_per_s=64 / step_s,
        phases_s=phases_s,
        syncs_per_step=0.0,
        flops_per_step=STEP_FLOPS,
        flops_source="counted",
    )


STEP_ADVICE: tuple[Advice, ...] = (
    replace(
        ADVICE[0],
        detail="rank 2 (PID 9103, GPU 2) spends 180 ms of each step in forward, the others' median 61 ms; its own "
        "work takes 317 ms a step against the others' 198 ms, and the others wait for it in collectives 38% of each "
        "step (it waits 0%)",
        action="Look at its forward pass on rank 2 (PID 9103, GPU 2): whatever makes it 119 ms longer there, on the "
        "CPU, in I/O, asleep or on its GPU: its main thread is on the CPU 93% of the time, the others' 46%. The "
        "whole job runs at its pace: every step ends with the other ranks waiting for it in the gradients' "
        "all-reduce.",
        source=SOURCE_PROBE,
        evidence={
            "rank": 2,
            "pid": STRAGGLER_PID,
            "gpus": (2,),
            "measured_by": "step",
            "phase": "forward",
            "phase_s": 0.18,
            "others_phase_s": 0.061,
            "own_step_s": 0.3174,
            "others_own_step_s": 0.1975,
            "others_wait_share": 0.376,
            "own_wait_share": 0.002,
            "step_s": 0.3226,
            "ranks": 4,
        },
    ),
    *ADVICE[1:],
)
"""``ADVICE`` as the advisor words it where every rank reports its step: the straggler measured by the step,
naming the phase its extra time is in."""


def stepped_torchrun_job(t: float = scenes.T0) -> Snapshot:
    """``torchrun_job`` with each rank's step anatomy: rank 2 is longer in its forward pass, the others wait for
    it in the all-reduce."""
    snap = torchrun_job(t)
    training = []
    for view in snap.training:
        rank = view.probe.rank
        if rank is None:
            training.append(view)
            continue
        step = _rank_step(rank, t)
        power = 690.0 if rank == STRAGGLER else 420.0
        cost = StepCost(
            energy_per_step_j=power * (step.step_s or 0.0),
            energy_per_sample_j=power * (step.step_s or 0.0) / 64,
            power_w=power,
            achieved_tflops=STEP_FLOPS / (step.step_s or 1.0) / 1e12,
            peak_tflops=989.0,
            peak_source="NVIDIA H100 SXM datasheet, dense bf16",
            precision="bf16",
            mfu=STEP_FLOPS / (step.step_s or 1.0) / 1e12 / 989.0,
        )
        training.append(replace(view, probe=replace(view.probe, step=step), cost=cost))
    return replace(snap, training=tuple(training))
