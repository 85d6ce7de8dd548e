"""The training node with each process in a container, pod, Slurm job or systemd unit: the dashboard's container
scene, a pure function of the time."""

from __future__ import annotations

from dataclasses import replace

from gputop.model import Container, GpuProcess, HostProcess, Snapshot
from tests.ui import scenes

POD_UID = "7f3a9c01-5b2e-4d6f-9a1b-0c2d3e4f5a6b"
RANK_CONTAINER = "c0ffee12" + "4e5d6c7b8a9f" * 4 + "0a1b2c3d4e5f6a7b"[:8]
NOTEBOOK_CONTAINER = "a1b2c3d4e5f6" + "0123456789abcdef" * 3 + "7890"
KUBERNETES = Container(
    "kubernetes",
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7f3a9c01_5b2e_4d6f_9a1b_0c2d3e4f5a6b.slice/"
    f"cri-containerd-{RANK_CONTAINER}.scope",
    id=RANK_CONTAINER,
    pod_uid=POD_UID,
)
DOCKER = Container("docker", f"/system.slice/docker-{NOTEBOOK_CONTAINER}.scope", id=NOTEBOOK_CONTAINER)
SLURM = Container("slurm", "/system.slice/slurmstepd.scope/job_48213/step_0/user/task_0", name="48213")
DESKTOP = Container("systemd", "/system.slice/display-manager.service", name="display-manager.service")


def container_of(pid: int, ppid: int | None) -> Container | None:
    """The torchrun job runs in a Kubernetes pod, the notebook in Docker, the eval as a Slurm job, the desktop
    under systemd; the CPU job in no container."""
    if pid in scenes.RANK_PIDS or pid == scenes.TORCHRUN_PID or ppid in scenes.RANK_PIDS:
        return KUBERNETES
    return {scenes.NOTEBOOK_PID: DOCKER, scenes.EVAL_PID: SLURM, scenes.XORG_PID: DESKTOP}.get(pid)


def _contained(host: HostProcess) -> HostProcess:
    return replace(host, container=container_of(host.pid, host.ppid))


def container_node(t: float = scenes.T0) -> Snapshot:
    """``scenes.training_node`` with each host process in its container."""
    snap = scenes.training_node(t)
    hosts = tuple(_contained(h) for h in snap.host_processes)
    by_pid = {h.pid: h for h in hosts}
    processes = tuple(replace(p, host=by_pid.get(p.pid, p.host)) if p.host is not None else p for p in snap.processes)
    return replace(snap, processes=processes, host_processes=hosts)


def in_container(p: GpuProcess) -> bool:
    return p.host is not None and p.host.container is not None and p.host.container.contained
