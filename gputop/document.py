"""One-shot output: the JSON document (schema 1, see docs/json.md) and the nvidia-smi-like text table."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

from gputop.model import GPU_OK, Gpu, GpuProcess, HostInfo, Snapshot, TrainingView
from gputop.sanitize import printable

SCHEMA = 1

GPU_KEYS = (
    "index",
    "uuid",
    "name",
    "state",
    "reason",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "sm_activity_percent",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "fan_percent",
    "pstate",
    "clock_sm_mhz",
    "clock_mem_mhz",
    "clock_sm_max_mhz",
    "clock_mem_max_mhz",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "throttle_reasons",
    "ecc_uncorrected_volatile",
)
PROCESS_KEYS = (
    "pid",
    "gpu_index",
    "kind",
    "gpu_memory_bytes",
    "sm_percent",
    "memory_bandwidth_percent",
    "user",
    "name",
    "command",
    "cpu_percent",
    "rss_bytes",
    "start_time",
    "status",
    "visible",
)
HOST_KEYS = (
    "hostname",
    "cpu_percent",
    "cpu_percent_per_core",
    "cpu_count",
    "usable_cpu_count",
    "load_average",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_available_bytes",
    "swap_total_bytes",
    "swap_used_bytes",
)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _record(obj: Gpu | GpuProcess | HostInfo, keys: tuple[str, ...]) -> dict[str, Any]:
    out = {key: _plain(getattr(obj, key)) for key in keys}
    unavailable = getattr(obj, "unavailable", None)
    if unavailable is not None:
        out["unavailable"] = dict(unavailable)
    return out


def snapshot_to_dict(snap: Snapshot) -> dict[str, Any]:
    """The snapshot as the stable JSON document; values that could not be read are null."""
    driver = snap.driver
    return {
        "schema": SCHEMA,
        "time": snap.time,
        "host": _record(snap.host, HOST_KEYS),
        "driver": {
            "status": driver.status,
            "reason": driver.reason,
            "driver_version": driver.driver_version,
            "cuda_version": driver.cuda_version,
            "nvml_version": driver.nvml_version,
        },
        "gpus": [_record(g, GPU_KEYS) for g in snap.gpus],
        "processes": [_record(p, PROCESS_KEYS) for p in snap.processes],
        "notices": list(snap.notices),
        "training": [training_to_dict(v) for v in snap.training],
    }


def training_to_dict(view: TrainingView) -> dict[str, Any]:
    """A training view with every model field under its own name, nested views as objects (docs/training.md)."""
    return _fields(view)


def _fields(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _fields(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _fields(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_fields(v) for v in value]
    return value


def snapshot_to_json(snap: Snapshot, indent: int | None = 2) -> str:
    return json.dumps(snapshot_to_dict(snap), indent=indent)


# -- text ------------------------------------------------------------------------------------------------------

NA = "N/A"


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units with three significant figures at most: 512B, 1.50KiB, 80.0GiB, 123MiB."""
    if n is None:
        return NA
    if abs(n) < 1024:
        return f"{int(n)}B"
    for unit in _BYTE_UNITS[1:]:
        n /= 1024
        if abs(n) < 1024 or unit == _BYTE_UNITS[-1]:
            break
    digits = 0 if abs(n) >= 100 else 1 if abs(n) >= 10 else 2
    return f"{n:.{digits}f}{unit}"


def fmt_percent(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def fmt_number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return NA if value is None else f"{value:.{digits}f}{unit}"


def fmt_span(seconds: float) -> str:
    """A length of time to the second, as the recording tools write it: ``45s``, ``12m05s``, ``1h02m03s``."""
    s = int(max(0.0, seconds) + 1e-6)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{s:02d}s"
    if minutes:
        return f"{minutes}m{s:02d}s"
    return f"{s}s"


def fmt_duration(seconds: float | None) -> str:
    """Elapsed time as ps does it: 59s, 12:03, 3:04:05, 2-03:04:05."""
    if seconds is None:
        return NA
    s = int(max(0, seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{s:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{s:02d}"
    if minutes:
        return f"{minutes}:{s:02d}"
    return f"{s}s"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows aligned in columns; every row has as many cells as the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _gpu_row(g: Gpu) -> list[str]:
    if g.state != GPU_OK:
        return [str(g.index), g.name or NA, g.state.upper(), g.reason or "", "", "", "", "", "", ""]
    memory = f"{fmt_bytes(g.memory_used_bytes)} / {fmt_bytes(g.memory_total_bytes)}"
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


def render_text(snap: Snapshot, width: int | None = None) -> str:
    """The snapshot as a plain table for terminals and logs: header, GPUs, then processes.

    ``width`` cuts process rows (long command lines) to the terminal; None keeps them whole, for files and pipes.
    """
    driver = snap.driver
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.time))
    lines = [f"{snap.host.hostname}  {stamp}"]
    if driver.ok:
        lines[0] += f"  driver {driver.driver_version or NA}  CUDA {driver.cuda_version or NA}"
    else:
        lines.append(f"No GPU information: {driver.reason}")
    lines.extend(f"note: {n}" for n in snap.notices)
    if snap.gpus:
        header = ["GPU", "Name", "Busy", "SM", "Memory used / total", "Temp", "Power / limit", "Fan", "Perf"]
        rows = [[*header, "Clocks SM / mem MHz"]] + [_gpu_row(g) for g in snap.gpus]
        lines += ["", *_table(rows, right={0, 2, 3, 5, 7})]
    elif driver.ok:
        lines.append("No NVIDIA GPU found.")
    lines.append("")
    if snap.processes:
        rows = [["GPU", "PID", "User", "Type", "GPU mem", "SM", "CPU", "Host mem", "Elapsed", "Command"]]
        for p in sorted(snap.processes, key=lambda p: (p.gpu_index, -(p.gpu_memory_bytes or 0), p.pid)):
            elapsed = None if p.start_time is None else snap.time - p.start_time
            command = p.command or (f"({p.unavailable.get('command')})" if p.unavailable.get("command") else NA)
            rows.append(
                [
                    str(p.gpu_index),
                    str(p.pid),
                    p.user or NA,
                    {"compute": "C", "graphics": "G"}.get(p.kind, "C+G"),
                    fmt_bytes(p.gpu_memory_bytes),
                    fmt_percent(p.sm_percent),
                    fmt_percent(p.cpu_percent),
                    fmt_bytes(p.rss_bytes),
                    fmt_duration(elapsed),
                    command,
                ]
            )
        lines += [line[:width] for line in _table(rows, right={0, 1, 4, 5, 6, 7, 8})]
    elif snap.gpus:
        lines.append("No GPU processes.")
    # Outside text was made visible where it was read; this is the last line of defence before a terminal.
    return "\n".join(map(printable, lines)).rstrip() + "\n"
