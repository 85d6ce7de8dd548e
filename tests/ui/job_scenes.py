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
    WARNING,
    Advice,
    GpuProcess,
    HostProcess,
    Launch,
    LoaderConfig,
    LoaderView,
    MainThread,
    PinMemoryStatus,
    ProbeReport,
    Snapshot,
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
