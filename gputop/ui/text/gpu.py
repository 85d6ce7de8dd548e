"""The text of a GPU card (several lines) and of a compact GPU row (one line), from one ``Gpu`` reading.

Pure functions of the reading, its sparklines, the width and a palette, so the layout is tested without a terminal.
Every value that could not be read prints as N/A in the dim style; nothing unreadable is drawn as zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_bytes, fmt_number, fmt_percent
from gputop.frozen import immutable
from gputop.model import (
    GPU_LOST_STATE,
    GPU_OK,
    HEALTH_CRITICAL,
    HEALTH_OK,
    MEASURING,
    MIG_ENABLED,
    Gpu,
    GpuProcess,
    MigInstance,
)
from gputop.ui.text.bars import fit, meter

THROTTLE_NAMES = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "HW slowdown",
    "sw_thermal_slowdown": "thermal (SW)",
    "hw_thermal_slowdown": "thermal (HW)",
    "hw_power_brake_slowdown": "power brake (HW)",
    "sync_boost": "sync boost",
    "applications_clocks_setting": "app clocks",
    "display_clock_setting": "display clock",
}
"""Clock-event reasons that slow a GPU down; ``gpu_idle`` is left out: an idle GPU is not throttled."""

MEMORY_CELLS = 22
"""``60.0GiB / 80.0GiB  75%``: used and total right-aligned in 7 cells each, so every GPU's figures line up."""
MIG_MEMORY_CELLS = 17
"""An instance's ``31.0GiB / 39.2GiB``."""
MIG_COUNT_CELLS = 10
"""``  2 procs``, ``  12 procs``: the count closes an instance's row in a cell of its own, so a ``1 proc`` row is
not a cell wider than the rest."""
MEASURING_MARK = "…"

MEMORY_WARN = 0.90
MEMORY_CRIT = 0.98
HOT_C = 85.0
SPARK_MAX = 40


@immutable
class Palette:
    """Rich styles for the parts of a card, taken from the widget's component classes (so themes apply)."""

    label: Style = field(default_factory=Style)
    fill: Style = field(default_factory=Style)
    warn: Style = field(default_factory=Style)
    crit: Style = field(default_factory=Style)
    track: Style = field(default_factory=Style)
    dim: Style = field(default_factory=Style)
    spark: Style = field(default_factory=Style)


@immutable
class Sparks:
    """The card's history lines, already sized: memory used %, GPU busy % and SM activity %, and on a GPU with
    GPM the history of each ``WORK_LINE`` metric as ``(field, sparkline)`` pairs."""

    memory: str = ""
    busy: str = ""
    sm: str = ""
    work: tuple[tuple[str, str], ...] = ()


def state_label(gpu: Gpu) -> str:
    """``LOST`` or ``ERROR`` for a GPU that cannot be read, ``CRITICAL`` or ``WARN`` for one whose health is not ok
    (``gputop.health``), empty for a healthy one."""
    if gpu.state != GPU_OK:
        return "LOST" if gpu.state == GPU_LOST_STATE else "ERROR"
    return "" if not unhealthy(gpu) else "CRITICAL" if gpu.health and gpu.health.state == HEALTH_CRITICAL else "WARN"


def unhealthy(gpu: Gpu) -> bool:
    """Whether the GPU's health is warn or critical: its card then has a HEALTH line."""
    return gpu.state == GPU_OK and gpu.health is not None and gpu.health.state != HEALTH_OK


def health_line(gpu: Gpu, width: int, p: Palette) -> Text:
    """``HEALTH Xid 79: GPU has fallen off the bus; drain the node …``: the worst cause, and how many more."""
    health = gpu.health
    assert health is not None
    line = Text(f"{'HLTH':<5}", style=p.label)
    style = p.crit if health.state == HEALTH_CRITICAL else p.warn
    more = len(health.causes) - 1
    tail = f"  (+{more} more: gputop doctor)" if more > 0 else ""
    first = health.causes[0] if health.causes else health.state
    room = max(8, width - line.cell_len - len(tail))
    if cell_len(first) > room:
        # A cause is what was seen, then what to do: where both do not fit, what was seen whole (the action is
        # in the finding and in gputop doctor) rather than the action cut mid-word.
        first = first.split("; ", 1)[0]
    line.append(fit(first, room).rstrip(), style=style)
    line.append(tail, style=p.dim)
    line.truncate(width)
    return line


def throttles(gpu: Gpu) -> list[str]:
    """Human names of the active reasons the GPU's clocks are held down."""
    return [THROTTLE_NAMES.get(r, r) for r in gpu.throttle_reasons or () if r != "gpu_idle"]


def has_sm_activity(gpu: Gpu) -> bool:
    """Whether the GPU reports real SM activity (GPM): read, or being measured for the first time."""
    return gpu.sm_activity_percent is not None or gpu.unavailable.get("sm_activity_percent") == "measuring"


REAL_WORK = (
    ("occ", "sm_occupancy_percent"),
    ("tensor", "tensor_activity_percent"),
    ("DRAM", "dram_bandwidth_percent"),
    ("fp32", "fp32_activity_percent"),
    ("fp16", "fp16_activity_percent"),
    ("fp64", "fp64_activity_percent"),
)
"""GPM's metrics beyond SM activity, label and ``Gpu`` field: what makes a GPU's card grow a WORK line."""

WORK_LINE = REAL_WORK[1:]
"""The metrics of a card's WORK line, each with its value and its history, in the order they are dropped last to
first when the line is narrow. Occupancy stays on the SM line: it describes the same SMs."""


def has_real_work(gpu: Gpu) -> bool:
    """Whether the GPU reports any of GPM's metrics beyond SM activity (occupancy, tensor, DRAM, FP pipes)."""
    return any(getattr(gpu, name) is not None for _, name in REAL_WORK)


def _shows_sm_line(gpu: Gpu) -> bool:
    return has_sm_activity(gpu) or has_real_work(gpu)


def in_mig(gpu: Gpu) -> bool:
    """Whether the GPU is partitioned into MIG instances: its card then has a row per instance instead of BUSY."""
    return gpu.state == GPU_OK and gpu.mig_mode == MIG_ENABLED


def card_line_count(gpu: Gpu) -> int:
    """How many lines the inside of a GPU's card takes."""
    if gpu.state != GPU_OK:
        return 2
    health = 1 if unhealthy(gpu) else 0
    if in_mig(gpu):
        return 3 + len(gpu.mig) + (0 if gpu.mig else 1) + health
    return 4 + (1 if _shows_sm_line(gpu) else 0) + (1 if has_real_work(gpu) else 0) + health


def mig_title(gpu: Gpu) -> str:
    """The card title's note on MIG: how many instances, and a mode change waiting for a reset."""
    if gpu.state != GPU_OK or gpu.mig_mode is None:
        return ""
    note = ""
    if gpu.mig_mode == MIG_ENABLED:
        count = len(gpu.mig)
        note = f"MIG · {count} instance{'' if count == 1 else 's'}"
    if gpu.mig_pending_mode is not None and gpu.mig_pending_mode != gpu.mig_mode:
        change = "MIG on after reset" if gpu.mig_pending_mode == MIG_ENABLED else "MIG off after reset"
        note = f"{note} · {change}" if note else change
    return note


def mig_process_counts(gpu: Gpu, processes: Sequence[GpuProcess]) -> tuple[int, ...]:
    """How many processes run on each of the GPU's MIG instances, in the order of ``gpu.mig``."""
    counts = {m.index: 0 for m in gpu.mig}
    for p in processes:
        if p.gpu_index == gpu.index and p.mig_index in counts:
            counts[p.mig_index] += 1
    return tuple(counts[m.index] for m in gpu.mig)


def spark_width(inner_width: int) -> int:
    """How many cells of a card line go to its sparkline."""
    return 0 if inner_width < 56 else min(SPARK_MAX, inner_width // 4)


def work_spark_width(inner_width: int) -> int:
    """How many cells each metric of the WORK line gets for its history: a third of a bar line's sparkline, so
    the first three metrics keep theirs on an 80-column card."""
    cells = spark_width(inner_width)
    return 0 if cells == 0 else max(6, min(12, cells // 3))


def subtitle(gpu: Gpu) -> str:
    """The card's bottom-border note: throttling and uncorrected ECC errors, the things to act on."""
    notes = []
    slow = throttles(gpu)
    if slow:
        notes.append("throttled: " + ", ".join(slow))
    if gpu.ecc_uncorrected_volatile:
        notes.append(f"ECC errors: {gpu.ecc_uncorrected_volatile}")
    return "  ".join(notes)


def _value(text: str, palette: Palette, style: Style | None = None) -> Text:
    return Text(text, style=palette.dim if text == NA else style or Style())


def _memory_style(fraction: float | None, palette: Palette) -> Style:
    if fraction is not None and fraction >= MEMORY_CRIT:
        return palette.crit
    return palette.warn if fraction is not None and fraction >= MEMORY_WARN else palette.fill


def _percent_of(value: float | None) -> float | None:
    return None if value is None else value / 100


def _bar_line(label: str, fraction: float | None, style: Style, info: Text, spark: str, width: int, p: Palette) -> Text:
    """``LABEL [bar] info`` with the sparkline flush right; the bar takes whatever the rest leaves."""
    spark_cells = len(spark) + 2 if spark else 0
    bar_width = max(4, width - 5 - 1 - max(22, info.cell_len) - spark_cells)
    line = Text(f"{label:<5}", style=p.label)
    line.append_text(meter(fraction, bar_width, style, p.track))
    line.append(" ")
    line.append_text(info)
    line.pad_right(width - spark_cells - line.cell_len)
    if spark:
        line.append("  " + spark, style=p.spark)
    line.truncate(width)
    return line


def _memory_info(gpu: Gpu, p: Palette, full: bool = False) -> Text:
    """``60.0GiB / 80.0GiB  75%`` in ``MEMORY_CELLS``, or ``N/A`` with the reason, in ``full`` words where asked."""
    if gpu.memory_used_bytes is None:
        return Text(f"{NA} ({gpu.memory_reason(full)})", style=p.dim)
    info = _value(fmt_bytes(gpu.memory_used_bytes).rjust(7), p)
    info.append(" / ")
    info.append_text(_value(fmt_bytes(gpu.memory_total_bytes).rjust(7), p))
    fraction = gpu.memory_used_fraction
    info.append(" ")
    info.append_text(_value(fmt_percent(None if fraction is None else fraction * 100).rjust(4), p))
    return info


def card_lines(gpu: Gpu, sparks: Sparks, width: int, p: Palette, mig_processes: Sequence[int] = ()) -> list[Text]:
    """The inside of a GPU card, ``width`` cells wide; ``mig_processes`` counts each MIG instance's processes."""
    if gpu.state != GPU_OK:
        return [
            Text(gpu.reason or "no reason given", style=p.crit),
            Text("Nothing can be read from it; gputop keeps trying to reopen it.", style=p.dim),
        ]
    fraction = gpu.memory_used_fraction
    memory = _memory_info(gpu, p, full=True)
    lines = [health_line(gpu, width, p)] if unhealthy(gpu) else []
    lines.append(_bar_line("MEM", fraction, _memory_style(fraction, p), memory, sparks.memory, width, p))
    if in_mig(gpu):
        lines += mig_lines(gpu.mig, mig_processes, width, p)
        if not gpu.mig:
            lines.append(Text("MIG mode, no instance created (nvidia-smi mig -cgi … -C)", style=p.dim))
        lines += _stat_lines(gpu, p)
        for line in lines:
            line.truncate(width)
        return lines
    busy = _value(fmt_percent(gpu.utilization_gpu_percent).rjust(4), p)
    busy.append("   mem ctrl ", style=p.label)
    busy.append_text(_value(fmt_percent(gpu.utilization_memory_percent), p))
    lines.append(_bar_line("BUSY", _percent_of(gpu.utilization_gpu_percent), p.fill, busy, sparks.busy, width, p))
    if _shows_sm_line(gpu):
        sm = _value(fmt_percent(gpu.sm_activity_percent).rjust(4), p)
        if has_real_work(gpu):
            sm.append("   occ ", style=p.label)
            sm.append_text(_value(fmt_percent(gpu.sm_occupancy_percent), p))
        lines.append(_bar_line("SM", _percent_of(gpu.sm_activity_percent), p.fill, sm, sparks.sm, width, p))
    if has_real_work(gpu):
        lines.append(work_line(gpu, dict(sparks.work), width, p))
    lines += _stat_lines(gpu, p)
    for line in lines:
        line.truncate(width)
    return lines


def work_line(gpu: Gpu, sparks: dict[str, str], width: int, p: Palette) -> Text:
    """What GPM says of the work behind SM activity, each metric with its history:
    ``WORK tensor  2% ▁▂▃▂▁▁  DRAM 11% ▂▃▃▃▂▂  fp32 77% ▆▆▇▇▆▆``. As many of ``WORK_LINE`` as fit in ``width``;
    what does not fit is left out whole, never cut."""
    line = Text(f"{'WORK':<5}", style=p.label)
    for label, name in WORK_LINE:
        value: float | None = getattr(gpu, name)
        part = Text(("" if line.cell_len == 5 else "  ") + label + " ", style=p.label)
        part.append_text(_value(fmt_percent(value).rjust(4), p))
        spark = sparks.get(name, "")
        if spark:
            part.append(" " + spark, style=p.spark)
        if line.cell_len + part.cell_len > width:
            break
        line.append_text(part)
    return line


def _stat_lines(gpu: Gpu, p: Palette) -> list[Text]:
    """Temperature, fan, performance state and power; then clocks and PCIe."""
    lines = []
    hot = gpu.temperature_c is not None and gpu.temperature_c >= HOT_C
    stats = Text()
    for label, value, style in (
        ("", fmt_number(gpu.temperature_c, "°C"), p.crit if hot else None),
        ("fan ", fmt_percent(gpu.fan_percent), None),
        ("", NA if gpu.pstate is None else f"P{gpu.pstate}", None),
        ("power ", f"{fmt_number(gpu.power_w)} / {fmt_number(gpu.power_limit_w, ' W')}", None),
    ):
        stats.append(label, style=p.label)
        stats.append_text(_value(value, p, style))
        stats.append("  ")
    lines.append(stats)
    links = Text("clocks SM ", style=p.label)
    links.append_text(_value(fmt_number(gpu.clock_sm_mhz, " MHz"), p))
    links.append("  mem ", style=p.label)
    links.append_text(_value(fmt_number(gpu.clock_mem_mhz, " MHz"), p))
    links.append("   PCIe rx ", style=p.label)
    links.append_text(_value(_rate(gpu.pcie_rx_bytes_per_s), p))
    links.append(" tx ", style=p.label)
    links.append_text(_value(_rate(gpu.pcie_tx_bytes_per_s), p))
    lines.append(links)
    return lines


def _instance_memory(instance: MigInstance, p: Palette) -> Text:
    if instance.memory_used_bytes is None:
        return Text(f"{NA} ({instance.unavailable.get('memory_used_bytes') or 'no reason given'})", style=p.dim)
    info = _value(fmt_bytes(instance.memory_used_bytes).rjust(7), p)
    info.append(" / ")
    info.append_text(_value(fmt_bytes(instance.memory_total_bytes), p))
    return info


def _activity_value(instance: MigInstance, name: str, p: Palette) -> Text:
    value: float | None = getattr(instance, name)
    if value is None and instance.unavailable.get(name) == MEASURING:
        return Text(MEASURING_MARK.rjust(4), style=p.dim)
    return _value(fmt_percent(value).rjust(4), p)


def mig_activity(instance: MigInstance, p: Palette, tensor: str = "tensor") -> Text:
    """``SM  79%  tensor  53%``; where neither could be read for one reason, that reason once:
    ``SM, tensor: unsupported`` (GPM, which measures them per instance, is Hopper's and newer's)."""
    names = ("sm_activity_percent", "tensor_activity_percent")
    reasons = {instance.unavailable.get(name) for name in names if getattr(instance, name) is None}
    if len(reasons) == 1 and instance.sm_activity_percent is None and instance.tensor_activity_percent is None:
        reason = reasons.pop()
        if reason not in (None, MEASURING):
            return Text(f"SM, {tensor}: {reason}", style=p.dim)
    text = Text("SM ", style=p.label)
    text.append_text(_activity_value(instance, names[0], p))
    text.append(f"  {tensor} ", style=p.label)
    text.append_text(_activity_value(instance, names[1], p))
    return text


def _process_count(processes: int, p: Palette) -> Text:
    """``  1 proc``, ``  2 procs``, padded to ``MIG_COUNT_CELLS`` so what follows starts in one column."""
    words = f"  {processes} proc{'' if processes == 1 else 's'}"
    return Text(words.ljust(MIG_COUNT_CELLS), style=p.label if processes else p.dim)


def mig_lines(instances: Sequence[MigInstance], processes: Sequence[int], width: int, p: Palette) -> list[Text]:
    """A row per MIG instance under its GPU: slot, profile and GPU instance id, a memory bar, SM and tensor
    activity (GPM), and how many processes run on it. ``processes``: the count of each instance, in order.

    Every part has one width on all the rows of a card, so the rows line up as columns whatever each holds."""
    counts = list(processes) + [0] * (len(instances) - len(processes))
    memories = [_instance_memory(m, p) for m in instances]
    activities = [mig_activity(m, p) for m in instances]
    memory_cells = max([MIG_MEMORY_CELLS, *(m.cell_len for m in memories)])
    activity_cells = max([0, *(a.cell_len for a in activities)])
    lines = []
    for instance, memory, activity, count in zip(instances, memories, activities, counts):
        gi = "?" if instance.gpu_instance_id is None else str(instance.gpu_instance_id)
        line = Text(f" {instance.index} ", style=p.label)
        line.append(fit(instance.profile or NA, 8))
        line.append(f" GI {gi:<3}", style=p.label)
        rest = 1 + memory_cells + 2 + activity_cells + MIG_COUNT_CELLS
        bar = max(4, width - line.cell_len - rest)
        fraction = instance.memory_used_fraction
        line.append_text(meter(fraction, bar, _memory_style(fraction, p), p.track))
        line.append(" ")
        memory.pad_right(memory_cells - memory.cell_len)
        line.append_text(memory)
        line.append("  ")
        activity.pad_right(activity_cells - activity.cell_len)
        line.append_text(activity)
        line.append_text(_process_count(count, p))
        line.truncate(width)
        lines.append(line)
    return lines


def compact_mig_line(instance: MigInstance, processes: int, width: int, p: Palette) -> Text:
    """One MIG instance on one line below its GPU's compact row."""
    gi = "?" if instance.gpu_instance_id is None else str(instance.gpu_instance_id)
    line = Text(f"   └ {instance.index} ", style=p.label)
    line.append(fit(instance.profile or NA, 8))
    line.append(f" GI {gi:<3}", style=p.label)
    fraction = instance.memory_used_fraction
    line.append(" MEM ", style=p.label)
    bar = 12 if width >= 120 else 6
    line.append_text(meter(fraction, bar, _memory_style(fraction, p), p.track))
    line.append_text(_value(fmt_percent(_times_100(fraction)).rjust(5), p))
    line.append("  ")
    line.append_text(mig_activity(instance, p, tensor="TC"))
    line.append_text(_process_count(processes, p))
    if fraction is None:
        line.append(f"  memory: {instance.unavailable.get('memory_used_bytes') or 'no reason given'}", style=p.dim)
    line.truncate(width)
    return line


def _rate(bytes_per_s: int | None) -> str:
    return NA if bytes_per_s is None else fmt_bytes(bytes_per_s) + "/s"


def short_name(name: str | None) -> str:
    """The model without the vendor prefix every GPU here shares."""
    if not name:
        return NA
    return name.removeprefix("NVIDIA ").removeprefix("GeForce ")


def compact_line(gpu: Gpu, spark: str, width: int, p: Palette) -> Text:
    """One GPU on one line, for small terminals and many GPUs.

    Every part has a fixed width that depends only on ``width``, so the rows of all GPUs line up as columns.
    """
    wide = width >= 120
    line = Text(f"{gpu.index:>2} ", style=p.label)
    name_width = 22 if wide else 14
    line.append(fit(short_name(gpu.name), name_width), style=p.label)
    if gpu.state != GPU_OK:
        line.append(f" {state_label(gpu)}: {gpu.reason or 'no reason given'}", style=p.crit)
        line.truncate(width)
        return line
    fraction = gpu.memory_used_fraction
    if wide:
        memory = _memory_info(gpu, p)
        memory.truncate(MEMORY_CELLS, overflow="ellipsis", pad=True)
    else:
        memory = _value(fmt_percent(_times_100(fraction)).rjust(4), p)
    flag_width = 18 if wide else 2
    spark_cells = len(spark) + 2 if spark else 0
    work = _compact_real_work(gpu, wide, p) if has_real_work(gpu) else Text()
    fixed = 3 + name_width + 6 + memory.cell_len + 6 + 5 + 8 + 6 + 6 + 4 + flag_width + spark_cells + work.cell_len
    bar = max(3, min(24, (width - fixed) // 2))
    line.append(" MEM ", style=p.label)
    line.append_text(meter(fraction, bar, _memory_style(fraction, p), p.track))
    line.append(" ")
    line.append_text(memory)
    if in_mig(gpu):
        # The BUSY bar's room, and SM's where GPM gives none: on a narrow row the reason memory reads N/A goes
        # first (each instance's memory is on its own row below).
        cells = bar + 11 + (0 if has_sm_activity(gpu) else 8)
        count = len(gpu.mig)
        note = f" MIG · {count} instance{'' if count == 1 else 's'}"
        if gpu.memory_used_bytes is None and not wide:
            note = f" ({gpu.memory_reason()}) MIG · {count}"
        line.append(fit(note, cells), style=p.label)
    else:
        line.append(" BUSY ", style=p.label)
        line.append_text(meter(_percent_of(gpu.utilization_gpu_percent), bar, p.fill, p.track))
        line.append_text(_value(fmt_percent(gpu.utilization_gpu_percent).rjust(5), p))
    if has_sm_activity(gpu):
        line.append(" SM ", style=p.label)
        line.append_text(_value(fmt_percent(gpu.sm_activity_percent).rjust(4), p))
    elif not in_mig(gpu):
        line.append(" " * 8)
    line.append_text(work)
    hot = gpu.temperature_c is not None and gpu.temperature_c >= HOT_C
    line.append(" ")
    line.append_text(_value(fmt_number(gpu.temperature_c, "°C").rjust(5), p, p.crit if hot else None))
    line.append_text(_value(fmt_number(gpu.power_w, "W").rjust(6), p))
    line.append_text(_value((NA if gpu.pstate is None else f"P{gpu.pstate}").rjust(4), p))
    slow = throttles(gpu)
    flag = (" ⚠ " + ", ".join(slow) if wide else " ⚠") if slow else ""
    flag_style = p.warn
    if unhealthy(gpu) and gpu.health is not None:
        last = gpu.health.last_xid
        flag = f" ✖ {state_label(gpu)}" + (f" Xid {last.xid}" if last else "") if wide else " ✖"
        flag_style = p.crit if gpu.health.state == HEALTH_CRITICAL else p.warn
    line.append(fit(flag, flag_width), style=flag_style)
    if spark_cells:
        line.append("  " + spark, style=p.spark)
    line.truncate(width)
    return line


def _compact_real_work(gpu: Gpu, wide: bool, p: Palette) -> Text:
    """Tensor activity after SM on a compact row (and occupancy and DRAM on a wide one), from the bars' room."""
    parts: tuple[tuple[str, float | None], ...] = (("TC", gpu.tensor_activity_percent),)
    if wide:
        parts += (("occ", gpu.sm_occupancy_percent), ("DRAM", gpu.dram_bandwidth_percent))
    text = Text()
    for label, value in parts:
        text.append(f" {label} ", style=p.label)
        text.append_text(_value(fmt_percent(value).rjust(4), p))
    return text


def _times_100(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100
