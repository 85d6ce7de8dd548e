"""The checks of ``gputop doctor``: each explains one kind of N/A or limit, with what to do about it.

``run()`` makes them all, each isolated: a check that fails with an exception becomes a ``limited`` check saying
so, and the others still run. Checks that need NVML are ``skipped`` when NVML could not start.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputop.collect.host import in_nested_pid_namespace
from gputop.collect.nvml import mig
from gputop.collect.nvml.errors import GpuLost
from gputop.collect.nvml.listing import list_processes
from gputop.collect.nvml.slot import GpuSlot, Variants
from gputop.doctor import nvml
from gputop.doctor.installation import Installed, installation_check, read_installed
from gputop.doctor.result import BLOCKED, INFO, LIMITED, OK, SKIPPED, Check, Fact, Report, Verdict
from gputop.model import (
    ACCESS_DENIED,
    COMPUTE,
    GPU_OK,
    GRAPHICS,
    INVALID,
    MEASURING,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    NOT_IN_MIG_MODE,
    NOT_REPORTED,
    NOT_VISIBLE,
    PROCESS_EXITED,
    UNSUPPORTED,
    ZOMBIE,
    Snapshot,
)
from gputop.probe import channel

SLOW_START_MS = 1000.0
"""An ``nvmlInit`` or first GPU call slower than this is the driver loading the GPU's state: persistence is off."""

GPM_BRANCH = 520
"""The first driver branch with GPM (``nvmlGpm*``)."""

PASSING = frozenset({MEASURING, PROCESS_EXITED, ZOMBIE, "no recent sample"})
"""Reasons that need nothing done and say nothing of the machine: the value comes with the next reading."""
FIXED = frozenset({UNSUPPORTED, NOT_IN_MIG_MODE, NOT_REPORTED})
"""Reasons no one can change: the hardware has no such value, NVML gives none on a GPU partitioned with MIG, or
the driver marks it not available (WDDM, vGPU). Information, not a limit."""
HARMLESS = PASSING | FIXED
GENERIC_FIX = "see the reason above; nvidia-smi -q shows the same value, and a newer driver may answer it"
"""The fix for a reason doctor has no words of its own for: every limit gets a fix line."""

REASON_ADVICE = {
    NO_PERMISSION: "run gputop as root (sudo gputop) to read the values NVML refuses this user",
    ACCESS_DENIED: "run gputop as root to read other users' processes in /proc",
    NOT_IN_DRIVER: "upgrade the NVIDIA driver (R535 or newer answers every call gputop makes)",
    NOT_VISIBLE: "run gputop on the host, or start the container with --pid=host",
    INVALID: "the driver returned a value that is not a number: update the driver",
}


def branch_of(driver_version: str | None) -> int | None:
    """The driver branch (550 for 550.90.07), or None."""
    major = (driver_version or "").split(".")[0]
    return int(major) if major.isascii() and major.isdigit() else None


def spans(numbers: Iterable[int]) -> str:
    """``0–3, 5, 7–8``: sorted, runs collapsed."""
    values = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for n in [*values, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = n
    return ", ".join(parts)


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def failed(id: str, title: str, exc: BaseException) -> Check:
    return Check(
        id,
        title,
        LIMITED,
        f"could not check: {type(exc).__name__}: {exc}",
        advice=("this is a bug in gputop doctor: please report it with the line above",),
        facts={"error": f"{type(exc).__name__}: {exc}"},
    )


def isolated(id: str, title: str, make: Callable[[], Check]) -> Check:
    """The check, or a ``limited`` one saying why it could not be made."""
    try:
        return make()
    except Exception as exc:  # one check's failure must not cost the others
        return failed(id, title, exc)


def skipped(id: str, title: str, because: str) -> Check:
    return Check(id, title, SKIPPED, f"not checked: {because}")


# -- driver and GPUs -----------------------------------------------------------------------------------------


def driver_check(session: nvml.Session) -> Check:
    title = "NVIDIA driver and NVML"
    facts: dict[str, Fact] = {
        "pynvml_version": nvml.pynvml_version(),
        "init_ms": session.init_ms,
        "driver_version": None,
        "branch": None,
        "nvml_version": None,
        "cuda_driver_version": None,
        "gpu_count": session.count,
        "error": session.reason,
    }
    if not session.started:
        return Check(
            "driver",
            title,
            BLOCKED,
            session.reason or "NVML did not start",
            advice=(_init_advice(session.reason),),
            facts=facts,
        )
    version, _ = session.system("nvmlSystemGetDriverVersion")
    nvml_version, _ = session.system("nvmlSystemGetNVMLVersion")
    cuda, _ = session.system("nvmlSystemGetCudaDriverVersion_v2")
    if cuda is None:
        cuda, _ = session.system("nvmlSystemGetCudaDriverVersion")
    driver = nvml.text(version) if version is not None else None
    branch = branch_of(driver)
    cuda_text = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda is not None else None
    facts.update(
        driver_version=driver,
        branch=f"R{branch}" if branch is not None else None,
        nvml_version=nvml.text(nvml_version) if nvml_version is not None else None,
        cuda_driver_version=cuda_text,
        gpu_count=session.count,
    )
    details = (
        f"driver {driver or 'unknown'} (branch {facts['branch'] or 'unknown'}), "
        f"NVML {facts['nvml_version'] or 'unknown'}",
        f"CUDA driver API {cuda_text or 'unknown'}, pynvml (nvidia-ml-py) {facts['pynvml_version'] or 'unknown'}",
    )
    if session.count is None:
        return Check("driver", title, BLOCKED, session.reason or "NVML could not count the GPUs", details, facts=facts)
    if session.count == 0:
        return Check(
            "driver",
            title,
            BLOCKED,
            "NVML started but sees no GPU",
            details,
            ("check nvidia-smi -L; in a container, start it with GPU access (docker run --gpus all)",),
            facts,
        )
    summary = f"driver {driver or 'unknown'}, {plural(session.count, 'GPU')}"
    if branch is not None and branch < 535:
        return Check(
            "driver",
            title,
            LIMITED,
            summary + f": R{branch} lacks calls gputop uses",
            details,
            (
                f"upgrade the driver to R535 or newer (R{branch} has no v3 process lists, no reserved-memory split"
                + (", no GPM" if branch < GPM_BRANCH else "")
                + ")",
            ),
            facts,
        )
    return Check("driver", title, OK, summary, details, facts=facts)


def _init_advice(reason: str | None) -> str:
    text = reason or ""
    if "pynvml" in text:
        return "pip install nvidia-ml-py in gputop's environment"
    if "not found" in text:
        return "install the NVIDIA driver, or start the container with GPU access (docker run --gpus all)"
    if "not loaded" in text:
        return "load the driver: sudo modprobe nvidia (see dmesg if it fails), then nvidia-smi"
    if "mismatch" in text:
        return (
            "reload the nvidia kernel module (sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; "
            "sudo modprobe nvidia) or reboot"
        )
    if "permission" in text:
        return "give this user access to /dev/nvidia* (usually the video group), or run as root"
    return "run nvidia-smi: it reports the same failure with NVIDIA's own words"


def gpus_check(snap: Snapshot) -> Check:
    title = "GPUs"
    lines = []
    bad = []
    for gpu in snap.gpus:
        name = gpu.name or "unknown GPU"
        if gpu.state == GPU_OK:
            lines.append(f"GPU {gpu.index}: {name} ({gpu.uuid or 'no UUID'})")
        else:
            bad.append(gpu)
            lines.append(f"GPU {gpu.index}: {name}: {gpu.state}: {gpu.reason}")
    facts: dict[str, Fact] = {
        "gpus": [
            {"index": g.index, "name": g.name, "uuid": g.uuid, "state": g.state, "reason": g.reason} for g in snap.gpus
        ]
    }
    if not bad:
        return Check("gpus", title, OK, f"{plural(len(snap.gpus), 'GPU')} answering", tuple(lines), facts=facts)
    advice = tuple(
        f"GPU {g.index}: check dmesg for Xid errors, then reset it (sudo nvidia-smi -r -i {g.index}) or reboot"
        for g in bad
    )
    verdict: Verdict = BLOCKED if len(bad) == len(snap.gpus) else LIMITED
    summary = f"{plural(len(bad), 'GPU')} of {len(snap.gpus)} cannot be read: GPU {spans(g.index for g in bad)}"
    return Check("gpus", title, verdict, summary, tuple(lines), advice, facts)


# -- start-up time and persistence -----------------------------------------------------------------------------


def persistence_check(session: nvml.Session) -> Check:
    title = "Persistence mode and start-up time"
    per_gpu: dict[str, Fact] = {}
    off: list[int] = []
    unknown: list[str] = []
    for index, handle in session.usable():
        enabled, reason = nvml.persistence(handle)
        per_gpu[str(index)] = enabled if enabled is not None else reason
        if enabled is False:
            off.append(index)
        elif enabled is None:
            unknown.append(f"GPU {index}: {reason}")
    timing = f"nvmlInit took {session.init_ms:.1f} ms" if session.init_ms is not None else "nvmlInit not timed"
    if session.first_device_ms is not None:
        timing += f", the first GPU call {session.first_device_ms:.1f} ms"
    facts: dict[str, Fact] = {
        "persistence": per_gpu,
        "init_ms": session.init_ms,
        "first_device_call_ms": session.first_device_ms,
    }
    slow = max(session.init_ms or 0.0, session.first_device_ms or 0.0) > SLOW_START_MS
    details = (timing, *unknown)
    if off:
        return Check(
            "persistence",
            title,
            LIMITED,
            f"persistence mode is off on GPU {spans(off)}" + (": start-up is slow" if slow else ""),
            details,
            (
                "enable persistence mode so the driver keeps the GPUs initialised between programs: "
                "sudo nvidia-smi -pm 1 (or run nvidia-persistenced); without it every NVML program's first call "
                "waits for the GPUs to initialise",
            ),
            facts,
        )
    on = [i for i, v in per_gpu.items() if v is True]
    summary = f"on for GPU {spans(int(i) for i in on)}" if on else "not readable"
    return Check("persistence", title, OK, f"{summary}; {timing}", details[1:], facts=facts)


# -- permissions ---------------------------------------------------------------------------------------------


def processes_check(session: nvml.Session) -> Check:
    """Whether this user may list each GPU's processes, asked as the collector asks it (``list_processes``): on a
    GPU in MIG mode, the GPU's own list is root's and each instance's list answers the others."""
    title = "GPU process lists"
    refused: list[int] = []
    missing: list[int] = []
    lost: list[int] = []
    per_instance: list[int] = []
    errors: list[str] = []
    variants = Variants()
    per_gpu: dict[str, Fact] = {}
    for index, handle in session.usable():
        slot = GpuSlot(index=index, handle=handle)
        try:
            in_mig = mig.read_mode(slot, lambda name, value, reason: None)
            found = list_processes(slot, variants, in_mig, sample_stale_s=0.0)
        except GpuLost:
            lost.append(index)
            per_gpu[str(index)] = nvml.LOST
            continue
        finally:
            mig.close(slot)
        reason = slot.process_reason
        per_gpu[str(index)] = reason if reason is not None else sum(p.kind != GRAPHICS for p in found)
        if slot.processes_per_instance:
            per_instance.append(index)
        if reason == NO_PERMISSION:
            refused.append(index)
        elif reason == NOT_IN_DRIVER:
            missing.append(index)
        elif reason is not None:
            errors.append(f"GPU {index}: {reason}")
    variant = variants.processes.get(COMPUTE)
    call = {
        3: "nvmlDeviceGetComputeRunningProcesses_v3",
        2: "nvmlDeviceGetComputeRunningProcesses_v2 (this driver has no _v3)",
        1: "the legacy v1 call (this driver has no _v2 or _v3: no MIG instance ids)",
    }
    details = [f"process lists come from {call[variant]}"] if variant is not None else []
    if per_instance:
        details.append(
            f"GPU {spans(per_instance)} in MIG mode: its instances' own lists answer (the GPU's own list holds "
            "their processes for root only)"
        )
    details += errors
    facts: dict[str, Fact] = {
        "per_gpu": per_gpu,
        "per_instance": [*per_instance],
        "call_version": variant,
        "euid": os.geteuid(),
    }
    advice = []
    if refused:
        advice.append(
            "NVML refuses this user the process lists: run gputop as root (sudo gputop), or ask the administrator "
            "to allow it (nvidia-smi shows no processes either)"
        )
    if missing:
        advice.append("upgrade the NVIDIA driver: this one has no process-list call that pynvml can use")
    if errors:
        advice.append(GENERIC_FIX)
    if refused or missing or errors:
        where = sorted(refused + missing)
        summary = (
            f"no permission to list the processes on GPU {spans(refused)}"
            if refused
            else f"cannot list the processes on GPU {spans(where) if where else '(see below)'}"
        )
        return Check("processes", title, LIMITED, summary, tuple(details), tuple(advice), facts)
    listed = sum(v for v in per_gpu.values() if isinstance(v, int) and not isinstance(v, bool))
    summary = f"readable on every GPU ({plural(listed, 'process', 'processes')} now)"
    if lost:
        summary += f"; GPU {spans(lost)} lost"
    return Check("processes", title, OK, summary, tuple(details), facts=facts)


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


# -- MIG and GPM ---------------------------------------------------------------------------------------------


def mig_check(states: Mapping[int, nvml.MigState]) -> Check:
    title = "MIG (Multi-Instance GPU)"
    facts: dict[str, Fact] = {
        str(i): {
            "current": s.current,
            "pending": s.pending,
            "instances": s.instances,
            "profiles": list(s.profiles),
            "reason": s.reason,
        }
        for i, s in states.items()
    }
    enabled = [i for i, s in states.items() if s.current]
    changing = [i for i, s in states.items() if s.current is not None and s.pending != s.current]
    unknown: dict[str, list[int]] = {}
    for i, s in states.items():
        if s.current is None:
            unknown.setdefault(s.reason or "unknown", []).append(i)
    details = [
        f"GPU {i}: MIG on, {plural(s.instances, 'instance') if s.instances is not None else 'instances unknown'}"
        + (f": {', '.join(s.profiles)}" if s.profiles else "")
        + (f" ({s.reason})" if s.reason else "")
        for i, s in states.items()
        if s.current
    ]
    details += [f"MIG mode {why} on GPU {spans(where)}" for why, where in unknown.items()]
    if changing:
        return Check(
            "mig",
            title,
            LIMITED,
            f"MIG mode changes at the next reset of GPU {spans(changing)}",
            tuple(details),
            tuple(f"reset GPU {i} to apply it: sudo nvidia-smi -r -i {i} (stop its processes first)" for i in changing),
            facts,
        )
    if enabled:
        return Check(
            "mig",
            title,
            OK,
            f"MIG on for GPU {spans(enabled)}: each instance is shown on its own (memory, processes; SM and tensor "
            "activity from GPM on Hopper and newer); NVML gives no utilization for the whole GPU",
            tuple(details),
            facts=facts,
        )
    if unknown and not any(s.current is not None for s in states.values()):
        summary = "MIG mode not readable: " + "; ".join(f"{why} on GPU {spans(w)}" for why, w in unknown.items())
        return Check("mig", title, OK, summary, facts=facts)
    summary = "MIG off on every GPU" if not unknown else "no GPU has MIG on"
    return Check("mig", title, OK, summary, tuple(details), facts=facts)


def gpm_check(
    support: Mapping[int, tuple[bool | None, str | None]], names: Mapping[int, str | None], branch: int | None
) -> Check:
    """GPM per GPU. A GPU older than Hopper has none, and nothing changes that: information, not a limit; a driver
    without it, or one that refuses it, is a limit with its fix."""
    title = "GPM (SM activity)"
    facts: dict[str, Fact] = {str(i): {"supported": s, "reason": r} for i, (s, r) in support.items()}
    yes = [i for i, (s, _) in support.items() if s]
    no_hw = [i for i, (s, r) in support.items() if s is False or (s is None and r == UNSUPPORTED)]
    missing = [i for i, (s, r) in support.items() if s is None and r == NOT_IN_DRIVER]
    refused = [i for i, (s, r) in support.items() if s is None and r == NO_PERMISSION]
    other = {
        i: r for i, (s, r) in support.items() if s is None and r not in (NOT_IN_DRIVER, NO_PERMISSION, UNSUPPORTED)
    }
    if not (no_hw or missing or refused or other):
        return Check("gpm", title, OK, f"SM activity available on GPU {spans(yes)}", facts=facts)
    info: list[str] = []
    if no_hw:
        models = sorted({names.get(i) or "unknown" for i in no_hw})
        info.append(f"GPU {spans(no_hw)} has no GPM ({', '.join(models)}: GPM needs Hopper or newer)")
        info.append("without GPM the SM column reads N/A; Busy (utilization.gpu) is still shown")
    if not (missing or refused or other):
        return Check("gpm", title, INFO, info[0], facts=facts, info=tuple(info[1:]))
    advice = []
    parts = []
    if missing:
        branch_text = f"R{branch}" if branch is not None else "this driver"
        parts.append(f"{branch_text} has no GPM (needs R{GPM_BRANCH} or newer) on GPU {spans(missing)}")
        advice.append(
            f"upgrade the NVIDIA driver to R{GPM_BRANCH} or newer (R535+ recommended) for SM activity, on a Hopper or "
            "newer GPU: older ones have no GPM with any driver"
        )
    if refused:
        parts.append(f"no permission to use GPM on GPU {spans(refused)}")
        advice.append("run gputop as root to read GPM")
    if other:
        parts.append(f"GPM not readable on GPU {spans(other)}")
        advice.append(GENERIC_FIX)
    details = tuple(f"GPU {i}: {r}" for i, r in other.items())
    return Check("gpm", title, LIMITED, "; ".join(parts), details, tuple(advice), facts, tuple(info))


# -- the snapshot's unreadable values ------------------------------------------------------------------------


@dataclass(frozen=True)
class Unreadable:
    """One field unreadable for one reason, on every GPU, process or host where it is."""

    owner: str  # "driver", "gpu", "gpu_process", "host_process"
    field: str
    reason: str
    where: tuple[int, ...]  # GPU indices, or PIDs

    @property
    def harmless(self) -> bool:
        return self.reason in HARMLESS

    def line(self) -> str:
        if self.owner == "driver":
            return f"driver: {self.reason}"
        if self.owner == "gpu":
            return f"{self.field}: {self.reason} on GPU {spans(self.where)}"
        what = "GPU process" if self.owner == "gpu_process" else "process"
        pids = ", ".join(str(p) for p in self.where[:5]) + (", …" if len(self.where) > 5 else "")
        return f"{self.field}: {self.reason} for {plural(len(self.where), what, what + 'es')} (PID {pids})"


def unreadable(snap: Snapshot) -> list[Unreadable]:
    """Every ``unavailable`` entry of the snapshot, repeats collapsed: one per owner, field and reason."""
    groups: dict[tuple[str, str, str], set[int]] = {}

    def add(owner: str, where: int, reasons: Mapping[str, str]) -> None:
        for name, reason in reasons.items():
            groups.setdefault((owner, name, reason), set()).add(where)

    if not snap.driver.ok:
        groups[("driver", "driver", snap.driver.reason or "unavailable")] = set()
    for gpu in snap.gpus:
        add("gpu", gpu.index, gpu.unavailable)
    for p in snap.processes:
        add("gpu_process", p.pid, p.unavailable)
    for h in snap.host_processes:
        add("host_process", h.pid, h.unavailable)
    return [
        Unreadable(owner, name, reason, tuple(sorted(where)))
        for (owner, name, reason), where in sorted(groups.items(), key=lambda kv: (_OWNERS.index(kv[0][0]), kv[0]))
    ]


_OWNERS = ("driver", "gpu", "gpu_process", "host_process")


def _grouped(found: Sequence[Unreadable]) -> tuple[str, ...]:
    """One line per reason and place, naming its fields: a GPU in MIG mode lacks a dozen fields for one reason."""
    groups: dict[tuple[str, str, tuple[int, ...]], list[str]] = {}
    for u in found:
        groups.setdefault((u.owner, u.reason, u.where), []).append(u.field)
    return tuple(
        Unreadable(owner, ", ".join(fields), reason, where).line() for (owner, reason, where), fields in groups.items()
    )


def fields_check(found: Sequence[Unreadable]) -> Check:
    title = "Unreadable values (N/A) in a snapshot"
    facts: dict[str, Fact] = {
        "unreadable": [{"owner": u.owner, "field": u.field, "reason": u.reason, "where": list(u.where)} for u in found]
    }
    if not found:
        return Check("fields", title, OK, "every value was read", facts=facts)
    limits = [u for u in found if not u.harmless]
    unchangeable = [u for u in found if u.reason in FIXED]
    fixed = _grouped(unchangeable)
    lines = tuple(u.line() for u in found if u.reason not in FIXED)
    if not limits:
        if not fixed:
            summary = f"{plural(len(found), 'field')} N/A, each one still measuring"
            return Check("fields", title, OK, summary, lines, facts=facts)
        return Check(
            "fields",
            title,
            INFO,
            f"{plural(len(unchangeable), 'field')} N/A that this hardware, its mode or its driver does not report",
            lines,
            facts=facts,
            info=fixed,
        )
    advice: list[str] = []
    for u in limits:
        hint = REASON_ADVICE.get(u.reason, GENERIC_FIX)
        if hint not in advice:
            advice.append(hint)
    return Check(
        "fields",
        title,
        LIMITED,
        f"{plural(len(limits), 'field')} N/A for a reason that can be fixed (of {len(found)} N/A)",
        lines,
        tuple(advice),
        facts,
        fixed,
    )


# -- probe directory and torch -------------------------------------------------------------------------------


def probe_dir_check(directory: str, source: str) -> Check:
    title = "Probe report directory"
    facts: dict[str, Fact] = {"path": directory, "source": source, "exists": False}
    details: list[str] = [f"{directory} (from {source})"]
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        parent = os.path.dirname(directory.rstrip("/")) or "/"
        if os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK):
            return Check(
                "probe_dir",
                title,
                OK,
                f"{directory} does not exist yet: gputop run creates it (mode 700)",
                tuple(details),
                facts=facts,
            )
        return Check(
            "probe_dir",
            title,
            LIMITED,
            f"{directory} cannot be created: {parent} is not writable here",
            tuple(details),
            (
                f"set {channel.DIR_ENV} to a directory of your own (mode 700); "
                "gputop run falls back to a new one each run",
            ),
            facts,
        )
    except OSError as exc:
        info = None
        problem: str | None = f"unreadable: {exc.strerror}"
    facts["exists"] = True
    if info is not None:
        facts["mode"] = f"{stat.S_IMODE(info.st_mode):o}"
        facts["owner_uid"] = info.st_uid
        details.append(f"mode {stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}")
        problem = channel.unsafe_reason(directory)
    if problem is None:
        reports = sum(channel.report_pid(n) is not None for n in _listdir(directory))
        facts["reports"] = reports
        return Check(
            "probe_dir",
            title,
            OK,
            f"{directory} is private and usable ({plural(reports, 'report')} in it now)",
            tuple(details),
            facts=facts,
        )
    facts["problem"] = problem
    fix = (
        f"chmod 700 {directory}"
        if "open to other users" in problem
        else f"remove {directory} (or set {channel.DIR_ENV})"
    )
    return Check(
        "probe_dir",
        title,
        LIMITED,
        f"{problem}: gputop run uses a new private directory each run instead, and the dashboard finds no reports "
        "of jobs started with the probe by hand",
        tuple(details),
        (fix,),
        facts,
    )


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


VERSION_FILE_MAX_BYTES = 64 * 1024
"""torch's version.py is a few hundred bytes; a larger one is not read."""


@dataclass(frozen=True)
class TorchView:
    installed: bool
    version: str | None = None
    cuda_build: str | None = None  # torch.version.cuda: None for a CPU-only build
    cuda_available: bool | None = None
    device_count: int | None = None
    error: str | None = None


def torch_build(package_dir: str) -> tuple[str, str | None] | None:
    """``(version, CUDA version or None)`` from torch's own ``version.py``, read without importing torch (an import
    costs a second or more); None when that file cannot be read as plain assignments."""
    try:
        with open(os.path.join(package_dir, "version.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read(VERSION_FILE_MAX_BYTES))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    version, cuda = values.get("__version__"), values.get("cuda", "")
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)) or cuda == "":
        return None
    return version, cuda


def read_torch() -> TorchView:
    """torch in this interpreter. A CPU-only build is known from its ``version.py`` alone; a CUDA build is imported
    to ask whether it sees the GPUs. Looking costs nothing when torch is not installed."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return TorchView(installed=False)
    build = next((b for d in spec.submodule_search_locations or () if (b := torch_build(d)) is not None), None)
    if build is not None and build[1] is None:
        return TorchView(True, build[0], None, cuda_available=False, device_count=0)
    try:
        with warnings.catch_warnings():  # torch warns on stderr about optional parts (NumPy) it cannot load
            warnings.simplefilter("ignore")
            import torch
    except Exception as exc:  # a broken install: missing libraries, an ABI mismatch
        return TorchView(installed=True, error=f"import failed: {type(exc).__name__}: {exc}")
    version = str(torch.__version__)
    cuda_build = torch.version.cuda
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:
        return TorchView(True, version, cuda_build, None, None, f"{type(exc).__name__}: {exc}")
    return TorchView(True, version, cuda_build, available, count)


def _cuda_tuple(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in (text or "").split(".")[:2]) or None
    except ValueError:
        return None


def torch_check(view: TorchView, gpu_count: int, driver_cuda: str | None) -> Check:
    title = "PyTorch"
    facts: dict[str, Fact] = {
        "installed": view.installed,
        "version": view.version,
        "cuda_build": view.cuda_build,
        "cuda_available": view.cuda_available,
        "device_count": view.device_count,
        "error": view.error,
        "python": sys.executable,
    }
    where = f"in {sys.executable}"
    if not view.installed:
        return Check(
            "torch",
            title,
            OK,
            f"not installed {where}: gputop needs it only for gputop demo; a job uses its own environment's torch",
            facts=facts,
        )
    if view.error:
        return Check(
            "torch",
            title,
            LIMITED,
            f"torch {view.version or ''} {where}: {view.error}".replace("  ", " "),
            advice=("reinstall torch in this environment (pip install --force-reinstall torch)",),
            facts=facts,
        )
    build = f"CUDA {view.cuda_build} build" if view.cuda_build else "CPU-only build"
    summary = f"torch {view.version} ({build}) {where}"
    if view.cuda_available:
        return Check("torch", title, OK, f"{summary} sees {plural(view.device_count or 0, 'GPU')}", facts=facts)
    if not gpu_count:
        return Check("torch", title, OK, f"{summary}; no GPU to see", facts=facts)
    if not view.cuda_build:
        return Check(
            "torch",
            title,
            LIMITED,
            f"{summary} cannot use the {plural(gpu_count, 'GPU')} here",
            advice=(
                "install a CUDA build of torch for jobs run with this Python "
                "(pip install torch --index-url https://download.pytorch.org/whl/cu124)",
            ),
            facts=facts,
        )
    built, driver = _cuda_tuple(view.cuda_build), _cuda_tuple(driver_cuda)
    if built and driver and built > driver:
        advice = (
            f"the driver supports CUDA {driver_cuda} at most and torch was built for CUDA {view.cuda_build}: upgrade "
            f"the driver, or install a torch built for CUDA {driver_cuda} or older",
        )
    else:
        advice = ("check CUDA_VISIBLE_DEVICES and access to /dev/nvidia* for this user",)
    return Check("torch", title, LIMITED, f"{summary} does not see the GPUs", advice=advice, facts=facts)


# -- all of them ---------------------------------------------------------------------------------------------


def take_snapshot() -> Snapshot:
    from gputop.collect.sampler import SnapshotMaker

    maker = SnapshotMaker()
    try:
        return maker.one_shot()
    finally:
        maker.close()


def run(
    snapshot: Callable[[], Snapshot] = take_snapshot,
    torch: Callable[[], TorchView] = read_torch,
    installed: Callable[[], Installed] = read_installed,
) -> Report:
    """Every check, in the order they are shown. Never raises."""
    checks: list[Check] = []
    try:
        session = nvml.Session.open()
    except Exception as exc:  # Session.open catches NVML's errors; this is anything else
        session = nvml.Session(reason=f"{type(exc).__name__}: {exc}")
    try:
        driver = isolated("driver", "NVIDIA driver and NVML", lambda: driver_check(session))
        checks.append(driver)
        snap: Snapshot | None = None
        snap_error: Exception | None = None
        try:
            snap = snapshot()
        except Exception as exc:
            snap_error = exc
        ready = session.started and bool(session.count)
        no_nvml = "NVML is not usable (see the driver check)"

        def with_snapshot(id: str, title: str, make: Callable[[Snapshot], Check]) -> Check:
            if snap is None:
                return failed(id, title, snap_error or RuntimeError("no snapshot"))
            taken = snap
            return isolated(id, title, lambda: make(taken))

        def with_nvml(id: str, title: str, make: Callable[[], Check]) -> Check:
            return isolated(id, title, make) if ready else skipped(id, title, no_nvml)

        checks.append(with_nvml("gpus", "GPUs", lambda: gpus_check(snap) if snap else _no_snapshot(snap_error)))
        checks.append(
            with_nvml("persistence", "Persistence mode and start-up time", lambda: persistence_check(session))
        )
        checks.append(with_nvml("processes", "GPU process lists", lambda: processes_check(session)))
        checks.append(isolated("proc", "Other users' processes (/proc)", lambda: proc_check(read_proc_view())))
        checks.append(
            isolated(
                "pid_namespace",
                "PID namespace",
                lambda: pid_namespace_check(
                    in_nested_pid_namespace(), len({p.pid for p in (snap.processes if snap else ()) if not p.visible})
                ),
            )
        )
        checks.append(
            with_nvml(
                "mig", "MIG (Multi-Instance GPU)", lambda: mig_check({i: nvml.mig(h) for i, h in session.usable()})
            )
        )
        branch = branch_of(_fact_text(driver.facts.get("driver_version")))
        names = {g.index: g.name for g in snap.gpus} if snap else {}
        checks.append(
            with_nvml(
                "gpm",
                "GPM (SM activity)",
                lambda: gpm_check({i: nvml.gpm(i, h) for i, h in session.usable()}, names, branch),
            )
        )
        checks.append(
            with_snapshot("fields", "Unreadable values (N/A) in a snapshot", lambda s: fields_check(unreadable(s)))
        )
        checks.append(
            isolated("probe_dir", "Probe report directory", lambda: probe_dir_check(*channel.report_dir_and_source()))
        )
        cuda = _fact_text(driver.facts.get("cuda_driver_version"))
        checks.append(isolated("torch", "PyTorch", lambda: torch_check(torch(), session.count or 0, cuda)))
        checks.append(isolated("installation", "Installation", lambda: installation_check(installed())))
    finally:
        session.close()
    return Report(tuple(checks))


def _fact_text(value: Fact) -> str | None:
    return value if isinstance(value, str) else None


def _no_snapshot(exc: Exception | None) -> Check:
    raise exc or RuntimeError("no snapshot")
