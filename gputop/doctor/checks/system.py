"""What the system lets gputop see of other users' processes: ``/proc``'s mount options and the PID namespace."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from gputop.doctor.checks.words import plural
from gputop.doctor.result import LIMITED, OK, Check, Fact


@dataclass(frozen=True)
class ProcView:
    """How this user sees /proc: what the kernel lets it read of other users' processes."""

    euid: int
    hidepid: str | None
    hidepid_gid: int | None
    ptrace_scope: int | None
    others_visible: int
    container: str | None


def proc_mount_options(mountinfo: str) -> dict[str, str]:
    """The super-block options of the /proc mount, from ``/proc/self/mountinfo``'s text."""
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields = head.split()
        parts = tail.split()
        if len(fields) >= 5 and fields[4] == "/proc" and parts[:1] == ["proc"]:
            options: dict[str, str] = {}
            for opt in (parts[2] if len(parts) > 2 else "").split(","):
                key, _, value = opt.partition("=")
                options[key] = value
            return options
    return {}


def container_kind(cgroup: str, exists: Callable[[str], bool] = os.path.exists) -> str | None:
    """Which container this is in, from marker files and ``/proc/1/cgroup``'s text, or None."""
    if exists("/.dockerenv"):
        return "docker"
    if exists("/run/.containerenv"):
        return "podman"
    for word in ("kubepods", "docker", "containerd", "lxc", "libpod"):
        if word in cgroup:
            return word
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_proc_view() -> ProcView:
    options = proc_mount_options(_read("/proc/self/mountinfo"))
    scope = _read("/proc/sys/kernel/yama/ptrace_scope").strip()
    me = os.geteuid()
    others = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                others += entry.stat().st_uid != me
            except OSError:
                continue
    gid = options.get("gid", "")
    return ProcView(
        euid=me,
        hidepid=options.get("hidepid"),
        hidepid_gid=int(gid) if gid.isdigit() else None,
        ptrace_scope=int(scope) if scope.isdigit() else None,
        others_visible=others,
        container=container_kind(_read("/proc/1/cgroup")),
    )


def proc_check(view: ProcView) -> Check:
    title = "Other users' processes (/proc)"
    facts: dict[str, Fact] = {
        "euid": view.euid,
        "hidepid": view.hidepid,
        "hidepid_gid": view.hidepid_gid,
        "ptrace_scope": view.ptrace_scope,
        "other_users_processes_visible": view.others_visible,
        "container": view.container,
    }
    details = [
        f"/proc mounted with hidepid={view.hidepid or '0'}"
        + (f", gid={view.hidepid_gid}" if view.hidepid_gid is not None else ""),
        f"{plural(view.others_visible, 'process', 'processes')} of other users visible",
    ]
    if view.ptrace_scope is not None:
        details.append(f"kernel.yama.ptrace_scope = {view.ptrace_scope}")
    if view.container:
        details.append(f"running in a container ({view.container})")
    if view.euid == 0:
        return Check("proc", title, OK, "running as root: every process is readable", tuple(details), facts=facts)
    if view.hidepid not in (None, "", "0", "off"):
        group = f"the group with GID {view.hidepid_gid} (the /proc mount's gid=)" if view.hidepid_gid else None
        return Check(
            "proc",
            title,
            LIMITED,
            f"/proc hides other users' processes (hidepid={view.hidepid}): their GPU processes show no command or user",
            tuple(details),
            (
                f"add this user to {group}, or run gputop as root"
                if group
                else "run gputop as root, or remount /proc with gid=GROUP and add this user to GROUP",
            ),
            facts,
        )
    return Check(
        "proc",
        title,
        OK,
        "other users' command lines and users are readable; their memory (USS) and wait channel need root",
        tuple(details),
        facts=facts,
    )


def pid_namespace_check(nested: bool, hidden: int) -> Check:
    title = "PID namespace"
    facts: dict[str, Fact] = {"nested": nested, "hidden_gpu_processes": hidden}
    if not nested:
        return Check("pid_namespace", title, OK, "the host's PID namespace: NVML's PIDs are these", facts=facts)
    return Check(
        "pid_namespace",
        title,
        LIMITED,
        "in a PID namespace of its own (a container without --pid=host): NVML reports host PIDs, which name other "
        "processes or none here, so GPU processes are shown without user, command or CPU and are never signalled "
        f"({plural(hidden, 'GPU process', 'GPU processes')} now)",
        advice=("run gputop on the host, or start the container with --pid=host",),
        facts=facts,
    )
