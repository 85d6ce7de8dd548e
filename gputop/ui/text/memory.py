"""Memory as PyTorch sees it, in the training panel: where it goes, part by part (weights, gradients, optimizer
state, activations, the allocator's cache, outside PyTorch: ``gputop.breakdown``), and per CUDA device what is
allocated, reserved by the caching allocator and held according to NVML, with peaks, allocation retries and OOMs."""

from __future__ import annotations

from collections.abc import Mapping

from rich.style import Style
from rich.text import Text

from gputop.breakdown import PART_NAMES, DeviceMemory, device_memory
from gputop.formatting import fmt_bytes, fmt_count
from gputop.model import CudaMemory, ProbeReport, TrainingView
from gputop.ui.text.bars import TRACK
from gputop.ui.text.gpu import Palette
from gputop.ui.text.parts import flow, label, na

ALLOCATED = "█"
RESERVED = "▓"
NVML_HELD = "▒"
"""The stacked bar's layers; shades, not only colours, tell them apart (NO_COLOR, screenshots)."""


def compact_cuda(view: TrainingView, p: Palette) -> Text | None:
    """``cuda:0 38.2GiB/44.0GiB`` (allocated / reserved) per device, for the summary line; None without a report."""
    if not view.probe.ok or not view.probe.cuda:
        return None
    line = Text()
    for device in view.probe.cuda:
        line.append(f"cuda:{device.device} ", style=p.label)
        line.append(f"{fmt_bytes(device.allocated_bytes)}/{fmt_bytes(device.reserved_bytes)}")
        if device.num_ooms:
            line.append(f" {device.num_ooms} OOM", style=p.crit)
        line.append("  ")
    line.rstrip()
    return line


def stacked_bar(device: CudaMemory, total: int | None, cells: int, p: Palette) -> Text:
    """Allocated, then reserved beyond it, then NVML's figure beyond that, on a track of the GPU's memory."""
    if not total or cells <= 0:
        return Text(TRACK * max(0, cells), style=p.track)
    layers = [(device.allocated_bytes, ALLOCATED, p.fill), (device.reserved_bytes, RESERVED, p.spark)]
    layers.append((device.nvml_process_bytes, NVML_HELD, p.label))
    bar = Text()
    drawn = 0
    for value, char, style in layers:
        if value is None:
            continue
        upto = max(drawn, min(cells, round(value / total * cells)))
        bar.append(char * (upto - drawn), style=style)
        drawn = upto
    bar.append(TRACK * (cells - drawn), style=p.track)
    return bar


def part_glyphs(p: Palette) -> dict[str, tuple[str, Style]]:
    """Each memory part's glyph and style: what persists across steps in the fill colour, from solid to light;
    the step's activations and the allocator's cache in the accent colour; what lies outside PyTorch muted. The
    glyphs alone tell the parts apart where there is no colour."""
    return {
        "weights": ("█", p.fill),
        "gradients": ("▓", p.fill),
        "optimizer": ("▒", p.fill),
        "other": ("░", p.fill),
        "activations": ("▆", p.spark),
        "cache": ("░", p.spark),
        "outside": ("▒", p.label),
    }


def parts_bar(device: DeviceMemory, whole: int | None, cells: int, p: Palette) -> Text:
    """The device's parts stacked in order on ``cells`` cells standing for ``whole`` bytes (the GPU's memory);
    a part too small for a cell of its own still gets one while the bar has room."""
    if not whole or cells <= 0:
        return Text(TRACK * max(0, cells), style=p.track)
    glyphs = part_glyphs(p)
    bar = Text()
    drawn = 0
    held = 0
    for name, size in device.parts():
        if not size:
            continue
        held += size
        upto = min(cells, max(drawn + 1, round(held / whole * cells)))
        char, style = glyphs[name]
        bar.append(char * (upto - drawn), style=style)
        drawn = upto
    bar.append(TRACK * (cells - drawn), style=p.track)
    return bar


def breakdown_lines(probe: ProbeReport, width: int, bar: int, p: Palette) -> list[Text]:
    """Per device the probe counted tensors on: the parts as one stacked bar on their sum (the bar of ``CUDA N``
    below puts the process on the GPU's memory), the parameters, their dtypes and the optimizers; then each part
    with its glyph, its size and its share. Nothing before the job's first optimizer step."""
    lines: list[Text] = []
    glyphs = part_glyphs(p)
    devices = device_memory(probe)
    for device in devices:
        if _bookkeeping(device, devices):
            continue
        where = f"{fmt_bytes(device.total)} {'in host memory' if device.device == 'cpu' else 'in all'}"
        facts = [parts_bar(device, device.total, bar, p), Text(where, style=p.dim), Text(_parameters(device, probe))]
        lines += flow(label(f"MEM {device.device}", p), facts, width)
        parts = []
        for name, size in device.parts():
            if size is None:
                continue
            char, style = glyphs[name]
            share = f" {size / device.total:.0%}" if device.total else ""
            parts.append(_legend(char, style) + Text(f"{PART_NAMES[name]} {fmt_bytes(size)}{share}"))
        lines += flow(label("", p), parts, width)
    return lines


BOOKKEEPING_BELOW_BYTES = 1 << 20


def _bookkeeping(device: DeviceMemory, devices: tuple[DeviceMemory, ...]) -> bool:
    """A device that holds no parameters and under a MiB, beside one that holds them: Adam's step counters, which
    torch keeps on the CPU for a model on the GPU (a few bytes per parameter tensor). A part of its own would say
    nothing; ``--json`` keeps it."""
    return (
        device.parameters == 0
        and device.total < BOOKKEEPING_BELOW_BYTES
        and any(other.parameters for other in devices if other is not device)
    )


def _parameters(device: DeviceMemory, probe: ProbeReport) -> str:
    """``1.3B params bfloat16 · AdamW``: how many parameters, their dtypes, the optimizers."""
    words = f"{fmt_count(device.parameters)} params" if device.parameters is not None else "params N/A"
    if device.weight_dtypes:
        words += " " + "+".join(name for name, _ in device.weight_dtypes)
    if probe.optimizers:
        words += " · " + ", ".join(probe.optimizers)
    return words


def _legend(char: str, style: Style) -> Text:
    """The bar's glyph for a layer, before its amount, in that layer's colour."""
    return Text().append(f"{char} ", style=style)


def _amount(name: str, value: int | None, p: Palette, reason: str = "not reported") -> Text:
    return Text(f"{name} " if name else "") + (na(reason, p) if value is None else Text(fmt_bytes(value)))


def _count(name: str, value: int | None, p: Palette, bad: bool) -> Text:
    if value is None:
        return Text(f"{name} ") + na("not reported", p)
    return Text(f"{name} {value}", style=p.crit if bad and value else "")


def cuda_lines(probe: ProbeReport, gpu_totals: Mapping[int, int], bar: int, width: int, p: Palette) -> list[Text]:
    """Per CUDA device of the job: the stacked bar on the GPU's memory with the allocator's retries and OOMs, the
    amounts the bar's layers stand for, and the peaks; or why there is nothing (``CUDA not initialised...``)."""
    if not probe.cuda:
        reason = probe.cuda_reason or "no CUDA device used by this process"
        return [label("CUDA", p).append(f"none: {reason}", style=p.dim)]
    lines = []
    for device in probe.cuda:
        total = gpu_totals.get(device.gpu_index) if device.gpu_index is not None else None
        gpu = f"GPU {device.gpu_index}" if device.gpu_index is not None else "GPU N/A (UUID not matched)"
        state = [
            stacked_bar(device, total, bar, p),
            Text(f"of {fmt_bytes(total)} on {gpu}", style=p.dim),
            _count("alloc retries", device.num_alloc_retries, p, bad=True),
            _count("OOMs", device.num_ooms, p, bad=True),
        ]
        amounts = [
            _legend(ALLOCATED, p.fill) + _amount("allocated", device.allocated_bytes, p),
            _legend(RESERVED, p.spark) + _amount("reserved", device.reserved_bytes, p),
            _legend(NVML_HELD, p.label) + _amount("NVML", device.nvml_process_bytes, p, "no NVML process row"),
        ]
        peaks = [
            _amount("peak allocated", device.allocated_peak_bytes, p),
            _amount("peak reserved", device.reserved_peak_bytes, p),
        ]
        lines += flow(label(f"CUDA {device.device}", p), state, width)
        lines += flow(label("", p), amounts, width)
        lines += flow(label("", p), peaks, width)
    pinned = probe.pinned_host
    if pinned is not None:
        parts = [_amount("", pinned.allocated_bytes, p), _amount("peak", pinned.allocated_peak_bytes, p)]
        lines += flow(label("PINNED HOST", p), parts, width)
    return lines
