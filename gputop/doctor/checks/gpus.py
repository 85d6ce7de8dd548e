"""Each GPU: whether it answers, whether this user may list its processes, its MIG mode, whether it has GPM."""

from __future__ import annotations

import os
from collections.abc import Mapping

from gputop.collect.nvml import ProcessListAccess
from gputop.collect.nvml.errors import LOST
from gputop.doctor import nvml
from gputop.doctor.checks.driver import GPM_BRANCH
from gputop.doctor.checks.words import GENERIC_FIX, plural, spans
from gputop.doctor.result import BLOCKED, INFO, LIMITED, OK, Check, Fact, Verdict
from gputop.model import (
    GPU_OK,
    NO_PERMISSION,
    NOT_IN_DRIVER,
    UNSUPPORTED,
    Snapshot,
)


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


def processes_check(access: ProcessListAccess) -> Check:
    """Whether this user may list each GPU's processes, asked as the collector asks it (``process_list_access``):
    on a GPU in MIG mode, the GPU's own list is root's and each instance's list answers the others."""
    title = "GPU process lists"
    refused: list[int] = []
    missing: list[int] = []
    lost: list[int] = []
    per_instance: list[int] = []
    errors: list[str] = []
    per_gpu: dict[str, Fact] = {}
    for gpu in access.gpus:
        reason = gpu.reason
        per_gpu[str(gpu.index)] = reason if reason is not None else gpu.compute
        if reason == LOST:
            lost.append(gpu.index)
            continue
        if gpu.per_instance:
            per_instance.append(gpu.index)
        if reason == NO_PERMISSION:
            refused.append(gpu.index)
        elif reason == NOT_IN_DRIVER:
            missing.append(gpu.index)
        elif reason is not None:
            errors.append(f"GPU {gpu.index}: {reason}")
    variant = access.compute_call
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
    listed = sum(gpu.compute for gpu in access.gpus if gpu.compute is not None)
    summary = f"readable on every GPU ({plural(listed, 'process', 'processes')} now)"
    if lost:
        summary += f"; GPU {spans(lost)} lost"
    return Check("processes", title, OK, summary, tuple(details), facts=facts)


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
