"""The nvidia-smi-like text table of ``gputop --once``: a header, the GPUs, the processes, then the training jobs
with a row per rank (the dashboard's job view, whose pure text builders in ``gputop.ui.text.job`` it shares)."""

from __future__ import annotations

import sys

from gputop.formatting import (
    NA,
    aligned,
    counted,
    fmt_bytes,
    fmt_clock,
    fmt_duration,
    fmt_number,
    fmt_percent,
    short_command,
)
from gputop.model import GPU_OK, MIG_ENABLED, Gpu, GpuProcess, HostProcess, MigInstance, Snapshot
from gputop.sanitize import printable


def _gpu_row(g: Gpu) -> list[str]:
    if g.state != GPU_OK:
        return [str(g.index), g.name or NA, g.state.upper(), g.reason or "", "", "", "", "", "", ""]
    memory = f"{fmt_bytes(g.memory_used_bytes)} / {fmt_bytes(g.memory_total_bytes)}"
    if g.memory_used_bytes is None:
        memory = f"{NA} ({g.memory_reason(full=True)})"
    power = f"{fmt_number(g.power_w, 'W')} / {fmt_number(g.power_limit_w, 'W')}"
    clocks = f"{fmt_number(g.clock_sm_mhz)} / {fmt_number(g.clock_mem_mhz)}"
    throttles = [r for r in (g.throttle_reasons or ()) if r != "gpu_idle"]
    return [
        str(g.index),
        g.name or NA,
        fmt_percent(g.utilization_gpu_percent),
        fmt_percent(g.sm_activity_percent),
        memory,
        fmt_number(g.temperature_c, "C"),
        power,
        fmt_percent(g.fan_percent),
        NA if g.pstate is None else f"P{g.pstate}",
        clocks + (f"  {','.join(throttles)}" if throttles else ""),
    ]


def _mig_rows(g: Gpu, processes: tuple[GpuProcess, ...]) -> list[list[str]]:
    """A GPU's MIG instances, each under it: slot, profile and ids, SM activity, memory, tensor activity and
    how many processes run on it (NVML has no utilization in MIG mode: Busy is left empty)."""
    if g.state != GPU_OK or g.mig_mode != MIG_ENABLED:
        return []
    rows = []
    for m in g.mig:
        count = sum(1 for p in processes if p.gpu_index == g.index and p.mig_index == m.index)
        rows.append(
            [
                "",
                f"└ MIG {m.index}  {m.profile or NA}  GI {_id(m.gpu_instance_id)} CI {_id(m.compute_instance_id)}",
                "",
                fmt_percent(m.sm_activity_percent),
                _instance_memory(m),
                "",
                "",
                "",
                "",
                f"{_instance_activity(m)}  {counted(count, 'process', 'processes')}",
            ]
        )
    return rows


def _instance_memory(m: MigInstance) -> str:
    if m.memory_used_bytes is None:
        return f"{NA} ({m.unavailable.get('memory_used_bytes') or 'no reason given'})"
    return f"{fmt_bytes(m.memory_used_bytes)} / {fmt_bytes(m.memory_total_bytes)}"


def _instance_activity(m: MigInstance) -> str:
    """``tensor 48%``, or where SM and tensor activity could not be read for one reason, ``SM, tensor: why``."""
    if m.sm_activity_percent is None and m.tensor_activity_percent is None:
        reasons = {m.unavailable.get(name) for name in ("sm_activity_percent", "tensor_activity_percent")}
        if len(reasons) == 1 and (reason := reasons.pop()):
            return f"SM, tensor: {reason}"
    return f"tensor {fmt_percent(m.tensor_activity_percent)}"


def _id(value: int | None) -> str:
    return NA if value is None else str(value)


def _instance(snap: Snapshot, p: GpuProcess) -> str:
    """The MIG column of a process row: its instance's profile and GPU instance id, ``3g.40gb#1``."""
    gpu = next((g for g in snap.gpus if g.index == p.gpu_index), None)
    found: MigInstance | None = next((m for m in gpu.mig if m.index == p.mig_index), None) if gpu else None
    if found is not None:
        return found.label
    return "-" if p.gpu_instance_id is None else f"GI {p.gpu_instance_id}"


def render_text(snap: Snapshot, width: int | None = None) -> str:
    """The snapshot as a plain table for terminals and logs: header, GPUs, then processes.

    ``width`` cuts process rows (long command lines) to the terminal, each program by its base name first; None
    keeps them whole, for files and pipes.
    """
    driver = snap.driver
    lines = [f"{snap.host.hostname}  {fmt_clock(snap.time, with_date=True)}"]
    if driver.ok:
        lines[0] += f"  driver {driver.driver_version or NA}  CUDA {driver.cuda_version or NA}"
    else:
        lines.append(f"No GPU information: {driver.reason}")
    lines.extend(f"note: {n}" for n in snap.notices)
    if snap.gpus:
        header = ["GPU", "Name", "Busy", "SM", "Memory used / total", "Temp", "Power / limit", "Fan", "Perf"]
        rows = [[*header, "Clocks SM / mem MHz"]]
        for g in snap.gpus:
            rows += [_gpu_row(g), *_mig_rows(g, snap.processes)]
        lines += ["", *aligned(rows, right={0, 2, 3, 5, 7})]
    elif driver.ok:
        lines.append("No NVIDIA GPU found.")
    lines.append("")
    if snap.processes:
        mig = any(g.mig_mode == MIG_ENABLED for g in snap.gpus)
        rows = [["GPU", *(["MIG"] if mig else []), "PID", "User", "Type", "GPU mem", "SM", "CPU", "Host mem"]]
        rows[0] += ["Elapsed", "Command"]
        for p in sorted(snap.processes, key=lambda p: (p.gpu_index, -(p.gpu_memory_bytes or 0), p.pid)):
            host = p.host or HostProcess(p.pid)
            elapsed = None if host.start_time is None else snap.time - host.start_time
            why = host.unavailable.get("command")
            command = host.command or (f"({why})" if why else NA)
            if width is not None and host.command:  # cut to the terminal: the script before the program's path
                command = short_command(host.command)
            rows.append(
                [
                    str(p.gpu_index),
                    *([_instance(snap, p)] if mig else []),
                    str(p.pid),
                    host.user or NA,
                    {"compute": "C", "graphics": "G"}.get(p.kind, "C+G"),
                    fmt_bytes(p.gpu_memory_bytes),
                    fmt_percent(p.sm_percent),
                    fmt_percent(host.cpu_percent),
                    fmt_bytes(host.rss_bytes),
                    fmt_duration(elapsed),
                    command,
                ]
            )
        right = {0, 1, 4, 5, 6, 7, 8} if not mig else {0, 2, 5, 6, 7, 8, 9}
        lines += [line[:width] for line in aligned(rows, right=right)]
    elif snap.gpus:
        lines.append("No GPU processes.")
    lines += _job_lines(snap, width)
    # Outside text was made visible where it was read; this is the last line of defence before a terminal.
    return "\n".join(map(printable, lines)).rstrip() + "\n"


def _job_lines(snap: Snapshot, width: int | None) -> list[str]:
    """Each training job: its title, a row per rank as the dashboard's job view has them (no straggler: that takes
    the advisor's window of snapshots), and how to get the numbers that ranks without a probe report lack."""
    from gputop.jobs import find_jobs

    jobs = find_jobs(snap)
    if not jobs:
        return []
    # The job view's text, imported only where there is a job: a plain --once pays nothing for it.
    import textwrap

    from gputop.ui.text.job import cell_text, job_columns, job_title, probe_hint, rank_rows
    from gputop.ui.text.step import step_words

    lines = []
    for job in jobs:
        ranks = rank_rows(job, snap)
        columns = job_columns(job, ranks, width or sys.maxsize)
        rows = [[c.title for c in columns], *([cell_text(r, c.key) for c in columns] for r in ranks)]
        lines += ["", job_title(job, ranks).strip(), *aligned(rows, {i for i, c in enumerate(columns) if c.right})]
        for rank in job.ranks:  # where each step's time goes, whole: the columns above may leave phases out
            words = step_words(rank.view)
            if not words:
                continue
            who = f"PID {rank.pid}" if rank.rank is None else f"rank {rank.rank}"
            lines += textwrap.wrap(f"{who} {words}", width, subsequent_indent="  ") if width else [f"{who} {words}"]
        hint = probe_hint(job)
        lines += textwrap.wrap(hint, width) if width else [hint] if hint else []
    return lines
