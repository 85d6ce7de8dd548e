"""Which container, pod, Slurm job or systemd unit a process runs in, from the text of ``/proc/PID/cgroup``.

Each runtime names the cgroup it makes for a container in its own way (the samples, with their sources, are in
``tests/data/cgroups/``):

- Docker: ``/docker/<id>`` (cgroupfs driver), ``/system.slice/docker-<id>.scope`` (systemd driver)
- Kubernetes: ``/kubepods/<qos>/pod<uid>/<id>`` (cgroupfs), ``/kubepods.slice/kubepods-<qos>.slice/
  kubepods-<qos>-pod<uid with _>.slice/{cri-containerd,crio,docker}-<id>.scope`` (systemd), and containerd's
  ``kubepods-<qos>-pod<uid>.slice:cri-containerd:<id>`` where systemd does not manage the cgroup
- Podman: ``libpod-<id>.scope`` under ``machine.slice`` or a user's ``user@UID.service``; ``libpod-conmon-<id>``
  holds its monitor
- LXC and LXD: ``/lxc/<name>``, ``/lxc.payload.<name>``
- Slurm: ``/system.slice/slurmstepd.scope/job_<n>/step_<s>/...`` (cgroup v2), ``/slurm/uid_<u>/job_<n>/...`` (v1;
  ``/slurm_<node>/...`` where slurmd is built to run several per host, as Debian's is)
- systemd: ``/system.slice/<unit>.service``, ``/user.slice/user-<uid>.slice/session-<n>.scope``

The file is written by the kernel, but its names partly by whoever made the cgroup (any user may make their own
below their session, named as they like): every part is bounded and made printable, and nothing here raises.
"""

from __future__ import annotations

import os
import re

from gputop.model import (
    ACCESS_DENIED,
    CGROUP_NAMESPACE,
    CGROUP_PATH_CHARS,
    CONTAINER_ID_CHARS,
    CONTAINER_NAME_CHARS,
    MALFORMED_CGROUP,
    PROCESS_EXITED,
    Container,
    ContainerRuntime,
)
from gputop.sanitize import printable

MAX_CGROUP_FILE_BYTES = 64 * 1024
"""The most of ``/proc/PID/cgroup`` read: a dozen v1 controllers with long paths take 2 KB."""
PREFERRED_V1 = ("name=systemd", "memory", "cpu", "pids")
"""The v1 hierarchies looked at for a systemd unit or another cgroup, in this order: those every init system and
container runtime places a process in."""

_HEX_ID = r"[0-9a-f]{12,64}"
_BARE_ID = re.compile(r"[0-9a-f]{64}")
_SCOPED_ID = re.compile(
    rf"(docker|cri-containerd|crio(?:-conmon)?|libpod(?:-conmon|-payload)?)-({_HEX_ID})(?:\.scope)?"
)
_CONTAINERD_ID = re.compile(rf".*:cri-containerd:({_HEX_ID})")
_POD_UID = re.compile(r"(?:^|-)pod([0-9a-fA-F][0-9a-fA-F_-]{7,63})(?:\.slice)?(?::|$)")
_SLURM_JOB = re.compile(r"job_(\d{1,20})", re.ASCII)  # a bare \d takes other scripts' digits too: ²
_SLURM_STEP = re.compile(r"step_(\d{1,10}|batch|extern|interactive)", re.ASCII)
_UNIT = re.compile(r".+\.(?:service|scope)")

_PREFIX_RUNTIME: dict[str, ContainerRuntime] = {
    "docker": "docker",
    "cri-containerd": "container",
    "crio": "container",
    "crio-conmon": "container",
    "libpod": "podman",
    "libpod-conmon": "podman",
    "libpod-payload": "podman",
}

# The kernel's initial cgroup namespace (PROC_CGROUP_INIT_INO in the kernel's proc_ns.h).
_INITIAL_CGROUP_NAMESPACE_INODE = 0xEFFFFFFB


def in_cgroup_namespace() -> bool:
    """Whether gputop runs in a cgroup namespace of its own (a container with ``--cgroupns=private``, the default
    on cgroup v2): the paths it reads are then relative to its own cgroup."""
    try:
        return os.stat("/proc/self/ns/cgroup").st_ino != _INITIAL_CGROUP_NAMESPACE_INODE
    except OSError:
        return False


def cgroup_paths(text: str) -> tuple[str | None, dict[str, str]]:
    """The v2 path (the ``0::`` line) and each v1 hierarchy's path, by controller, of a ``/proc/PID/cgroup``."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in text.splitlines():
        number, colon, rest = line.partition(":")
        controllers, colon2, path = rest.partition(":")
        if not (colon and colon2 and number.isdigit() and path.startswith("/")):
            continue
        if number == "0" and not controllers:
            v2 = path
        else:
            for controller in controllers.split(","):
                v1.setdefault(controller, path)
    return v2, v1


def container_of(text: str, in_namespace: bool = False) -> tuple[Container | None, str | None]:
    """The container (or job, or unit) the process whose ``/proc/PID/cgroup`` is ``text`` runs in, and the reason
    when there is none to tell: ``(None, None)`` is a process in the root cgroup or ``init.scope``.

    A container or a Slurm job on any line wins (a Slurm job may be in the v1 freezer hierarchy only, its other
    hierarchies under ``slurmd.service``); else the v2 path, or the first v1 hierarchy of ``PREFERRED_V1`` that is
    not the root, names a systemd unit or a cgroup of the process's own. ``in_namespace`` says gputop runs in a
    cgroup namespace, where the root is the namespace's own cgroup and says nothing."""
    v2, v1 = cgroup_paths(text[:MAX_CGROUP_FILE_BYTES])
    if v2 is None and not v1:
        return None, MALFORMED_CGROUP
    preferred = ([v2] if v2 is not None else []) + [v1[name] for name in PREFERRED_V1 if name in v1]
    for path in dict.fromkeys([*preferred, *v1.values()]):
        found = _contained(path)
        if found is not None:
            return found, None
    for path in preferred:
        if path.rstrip("/") not in ("", "/init.scope"):
            return _host_group(path), None
    return None, CGROUP_NAMESPACE if in_namespace else None


def _bounded(text: str, limit: int) -> str:
    return printable(text if len(text) <= limit else f"{text[: limit - 1]}…")


def _path(path: str) -> str:
    return _bounded(path, CGROUP_PATH_CHARS)


def _contained(path: str) -> Container | None:
    """A container, pod or Slurm job named by ``path``, if any; the innermost one (Docker in Docker) wins."""
    parts = [p for p in path[: CGROUP_PATH_CHARS * 4].split("/") if p]
    pod_uid = next((m.group(1).replace("_", "-") for m in map(_POD_UID.search, parts) if m), None)
    kubernetes = pod_uid is not None or any(p.startswith("kubepods") for p in parts)
    for index in range(len(parts) - 1, -1, -1):
        found = _container_part(parts, index)
        if found is not None:
            runtime, container_id, name = found
            if kubernetes:
                runtime = "kubernetes"
            return Container(
                runtime,
                _path(path),
                id=container_id[:CONTAINER_ID_CHARS],
                pod_uid=None if pod_uid is None else _bounded(pod_uid, CONTAINER_NAME_CHARS),
                name=name,
            )
    job = _slurm_job(parts)
    if job is not None:
        return Container("slurm", _path(path), name=job)
    if kubernetes and pod_uid is not None:  # the pod's own cgroup, no container below it
        return Container("kubernetes", _path(path), pod_uid=_bounded(pod_uid, CONTAINER_NAME_CHARS))
    return _lxc(parts, path)


def _container_part(parts: list[str], index: int) -> tuple[ContainerRuntime, str, str | None] | None:
    """The runtime, id and name of the container that ``parts[index]`` names, if it names one."""
    part = parts[index]
    scoped = _SCOPED_ID.fullmatch(part)
    if scoped is not None:
        prefix, container_id = scoped.groups()
        return _PREFIX_RUNTIME[prefix], container_id, "conmon" if prefix.endswith("conmon") else None
    containerd = _CONTAINERD_ID.fullmatch(part)
    if containerd is not None:
        return "container", containerd.group(1), None
    if _BARE_ID.fullmatch(part):
        return ("docker" if index and parts[index - 1] == "docker" else "container"), part, None
    return None


def _slurm_job(parts: list[str]) -> str | None:
    job = slurm_ids(parts)
    return None if job is None else job[0]


def slurm_ids(parts: list[str]) -> tuple[str, str | None] | None:
    """The job id and step (``0``, ``batch``, ``extern``, ``interactive``; None above the steps) of a Slurm job's
    cgroup path, split at ``/``: ``job_<n>`` below ``slurm`` or ``slurm_<node>`` (v1) or a ``slurmstepd.scope``
    (v2, which a node may prefix with its name)."""
    for index, part in enumerate(parts):
        job = _SLURM_JOB.fullmatch(part)
        if job is not None and any(
            p == "slurm" or p.startswith("slurm_") or p.endswith("slurmstepd.scope") for p in parts[:index]
        ):
            step = _SLURM_STEP.fullmatch(parts[index + 1]) if index + 1 < len(parts) else None
            return job.group(1), None if step is None else step.group(1)
    return None


def _lxc(parts: list[str], path: str) -> Container | None:
    for index, part in enumerate(parts):
        name = None
        if part.startswith(("lxc.payload.", "lxc.monitor.")):
            name = part.split(".", 2)[2]
        elif part == "lxc" and index + 1 < len(parts):
            name = parts[index + 1]
        if name:
            return Container("lxc", _path(path), name=_bounded(name, CONTAINER_NAME_CHARS))
    return None


def _host_group(path: str) -> Container:
    """A systemd unit (the innermost ``.service`` or ``.scope``), or a cgroup of its own named by its path."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if _UNIT.fullmatch(last):
        return Container("systemd", _path(path), name=_bounded(last, CONTAINER_NAME_CHARS))
    return Container("cgroup", _path(path))


def read_container(pid: int, in_namespace: bool = False) -> tuple[Container | None, str | None]:
    """The container of process ``pid`` and the reason when there is none to tell (see ``container_of``);
    a process that is gone, or whose file may not be read, has no container and that reason."""
    try:
        with open(f"/proc/{pid}/cgroup", "rb") as f:
            data = f.read(MAX_CGROUP_FILE_BYTES)
    except (FileNotFoundError, ProcessLookupError):
        return None, PROCESS_EXITED
    except PermissionError:
        return None, ACCESS_DENIED
    except OSError as exc:
        return None, f"error: {exc.strerror}"
    return container_of(data.decode(errors="replace"), in_namespace)
