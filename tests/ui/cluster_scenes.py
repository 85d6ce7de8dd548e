"""The training node as a cluster sees it: its processes in Kubernetes pods known by name and in a Slurm job
known by name, gputop inside a Slurm allocation, and GPUs whose health is not ok. Pure functions of the time,
like ``scenes``."""

from __future__ import annotations

from dataclasses import replace

from gputop.collect.slurm_allocation import Allocation
from gputop.health import judged
from gputop.model import GpuHealth, HostProcess, Pod, SlurmJob, Snapshot, XidCount, frozen_reasons
from tests.ui import container_scenes, scenes

RANK_POD = Pod("ml-training", "llama3-8b-pretrain-worker-0", "trainer")
TORCHRUN_POD = Pod("ml-training", "llama3-8b-pretrain-worker-0", None, source="logs")
"""The launcher's pod as the kubelet's log directories name it: they do not say which container a PID is in."""
EVAL_JOB = SlurmJob("48213", step="0", name="train", user="carol", state="RUNNING", gpus=(6, 7))

ALLOCATION = Allocation("12", ("3", "1"), "SLURM_JOB_GPUS", name="train")
"""gputop started inside job 12's allocation, which holds GPUs 3 and 1 of this node."""

CRITICAL_GPU = 4
WARN_GPU = 6
XID_TIME = scenes.T0 - 95
CRITICAL_HEALTH = GpuHealth(
    xids=(XidCount(79, 1, XID_TIME),),
    remapped_rows_correctable=2,
    remapped_rows_uncorrectable=1,
    remapped_rows_pending=True,
    remapped_rows_failed=False,
    pcie_replays=14,
    pcie_replays_per_min=0.0,
    unavailable=frozen_reasons(
        {
            name: "unsupported"
            for name in ("retired_pages_single_bit", "retired_pages_double_bit", "retired_pages_pending")
        }
    ),
)
"""Xid 79 (the GPU fell off the bus) 95 s ago, after a row remapping that waits for a reset."""
WARN_HEALTH = GpuHealth(
    remapped_rows_correctable=0,
    remapped_rows_uncorrectable=0,
    remapped_rows_pending=False,
    remapped_rows_failed=False,
    pcie_replays=1_204,
    pcie_replays_per_min=31.0,
)
"""A PCIe link retrying 31 times a minute: a riser or slot going bad."""


def pod_node(t: float = scenes.T0) -> Snapshot:
    """``container_scenes.container_node`` with the torchrun job's pod known by name (the ranks' from the API
    server with their container, the launcher's from the log directories without) and the eval's Slurm job by
    name."""
    snap = container_scenes.container_node(t)

    def named(host: HostProcess) -> HostProcess:
        if host.pid in scenes.RANK_PIDS:
            return replace(host, pod=RANK_POD)
        if host.pid == scenes.TORCHRUN_PID:
            return replace(host, pod=TORCHRUN_POD)
        if host.pid == scenes.EVAL_PID:
            return replace(host, slurm=EVAL_JOB)
        return host

    hosts = tuple(named(h) for h in snap.host_processes)
    by_pid = {h.pid: h for h in hosts}
    processes = tuple(replace(p, host=by_pid.get(p.pid, p.host)) if p.host is not None else p for p in snap.processes)
    return replace(snap, processes=processes, host_processes=hosts)


def unhealthy_node(t: float = scenes.T0) -> Snapshot:
    """``scenes.training_node`` with GPU 4 critical (Xid 79, a row remapping pending) and GPU 6 at warn (PCIe
    replays); the others healthy. The states and causes are the health judge's own."""
    snap = scenes.training_node(t)
    healthy = GpuHealth(remapped_rows_correctable=0, remapped_rows_uncorrectable=0, pcie_replays=0)
    readings = {CRITICAL_GPU: CRITICAL_HEALTH, WARN_GPU: WARN_HEALTH}
    gpus = tuple(
        replace(g, health=judged(readings.get(g.index, healthy), g.ecc_uncorrected_volatile, None, t))
        for g in snap.gpus
    )
    return replace(snap, gpus=gpus)
