"""An estimate as text (a column per batch size, the largest batch that fits, the rule of thumb, the layer table)
and as a JSON document. Pure: no torch."""

from __future__ import annotations

import dataclasses
from typing import Any

from gputop.estimate.defaults import ASSUMED_KERNELS, SHARD_HOLDS
from gputop.estimate.flops import MATH_PRECISION
from gputop.estimate.parts import RULE_OF_THUMB_BYTES_PER_PARAMETER, BatchEstimate, LayerRow
from gputop.estimate.report import Report
from gputop.estimate.search import MAX_BATCH
from gputop.formatting import aligned, counted, fmt_bytes
from gputop.sanitize import printable

SCHEMA = 1
"""The JSON document's version: a key is only ever added within one."""

_PART_ROWS = (
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer state"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
)


def render_text(report: Report) -> str:
    """The estimate for people: what was run, a table with a column per batch size, then the conclusions."""
    settings = report.settings
    what = "inference (one forward pass, no gradients)" if settings.inference else f"training, {settings.optimizer}"
    checkpointing = ""
    if settings.checkpointing:
        checkpointing = ", activation checkpointing" + (
            f" of {printable(report.checkpointed)}" if report.checkpointed else ""
        )
    lines = [
        f"{printable(report.model)}: {counted(report.parameters, 'parameter')}, {what}, {settings.precision}"
        + checkpointing,
    ]
    lines.append(f"kernels: {ASSUMED_KERNELS[settings.kernels]}")
    if settings.shard is not None:
        holds = SHARD_HOLDS[settings.shard].format(n=settings.gpus)
        lines.append(f"sharded over {settings.gpus} GPUs, the figures one GPU's (rank 0); each holds {holds}")
    if settings.memory_bytes is not None:
        lines.append(f"GPU memory {fmt_bytes(settings.memory_bytes)}, keeping {percent(settings.margin)} free")
    lines += ["", *aligned(_batch_rows(report), right=set(range(1, len(report.batches) + 1)))]
    lines += ["", *conclusions(report)]
    if report.layers is not None:
        lines += ["", *layer_lines(report.layers)]
    return "\n".join(lines) + "\n"


def percent(share: float) -> str:
    """A share as a percentage with the digits it has: ``10%``, ``2.5%``, never ``0%`` for 0.05 %."""
    return f"{share * 100:.4g}%"


def _batch_rows(report: Report) -> list[list[str]]:
    batches = report.batches
    rows = [["at the peak", *(f"batch {b.batch_size}" for b in batches)]]
    rows += [[label, *(fmt_bytes(getattr(b.at_peak, part)) for b in batches)] for part, label in _PART_ROWS]
    if any(b.gathered_bytes is not None for b in batches):
        rows.append(["  all-gathered weights", *(fmt_bytes(b.gathered_bytes or 0) for b in batches)])
    rows += [
        ["peak allocated", *(fmt_bytes(b.peak_allocated_bytes) for b in batches)],
        ["reserved (allocator)", *(fmt_bytes(b.reserved_bytes) for b in batches)],
        [
            f"NVML (+{fmt_bytes(report.settings.context_bytes)} context)",
            *(fmt_bytes(b.nvml_bytes) for b in batches),
        ],
    ]
    if report.settings.memory_bytes is not None:
        rows.append(["fits", *("yes" if b.fits else "no" for b in batches)])
    return rows


def conclusions(report: Report) -> list[str]:
    """The largest batch that fits, and the rule of thumb beside the first batch size's peak."""
    lines = []
    if report.largest_batch is not None:
        margin = percent(report.settings.margin)
        if report.largest_batch == 0:
            lines.append(f"largest batch that fits: none, not even 1 (margin {margin})")
        elif report.largest_batch == MAX_BATCH:
            lines.append(f"largest batch that fits: {MAX_BATCH} or more, where the search stops (margin {margin})")
        else:
            lines.append(
                f"largest batch that fits: {report.largest_batch} "
                f"(margin {margin}, {counted(report.search_estimates, 'estimate')})"
            )
    lines += rule_of_thumb_lines(report)
    lines += flops_lines(report)
    return lines


def flops_lines(report: Report) -> list[str]:
    """The FLOPs of a step, and its time on the GPU model asked for."""
    if report.flops_per_step is None:
        return []
    what = "a forward pass" if report.settings.inference else "a step"
    lines = [
        f"FLOPs of {what} at batch {report.batches[0].batch_size}: {fmt_flops(report.flops_per_step)} "
        "(matrix products and convolutions, as torch's FLOP counter and the live MFU count them)"
    ]
    time = report.step_time
    if time is not None:
        lines.append(
            f"on {time.gpu} ({time.peak_tflops:g} TFLOP/s dense {MATH_PRECISION[report.settings.precision]}): "
            f"{fmt_seconds(time.fastest_s)} to {fmt_seconds(time.slowest_s)} per step at {time.mfu_source}"
        )
    return lines


def fmt_flops(flops: float) -> str:
    """``310 MFLOP``, ``1.52 TFLOP``: three significant digits."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"


def fmt_seconds(seconds: float) -> str:
    """``25.3 µs``, ``12.3 ms``, ``1.52 s``: three significant digits."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


_STATE_PARTS = (("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer state"))


RULE_OF_THUMB_OPTIMIZERS = frozenset({"adam", "adamw", "nadam", "radam", "adamax"})
"""The optimizers with two moments per parameter, for which the rule of thumb was made: beside SGD (one buffer or
none) or a forward pass alone it would mislead."""


def rule_of_thumb_lines(report: Report) -> list[str]:
    """The rule of thumb (training with an Adam-like optimizer only), then the first batch size's estimated peak
    split into the parts live at it: the state the rule counts, and the activations and temporaries it does not.
    The terms are those of the table's column, so they add up to the peak the line names."""
    first = report.batches[0]
    peak = first.at_peak
    live = [label for part, label in _STATE_PARTS if getattr(peak, part)] or ["weights"]
    state = ", ".join(live[:-1]) + " and " + live[-1] if len(live) > 1 else live[0]
    terms = (
        (state, peak.weights + peak.gradients + peak.optimizer),
        ("activations", peak.activations),
        ("temporaries", peak.temporaries),
    )
    rule = []
    if (report.settings.optimizer or "").lower() in RULE_OF_THUMB_OPTIMIZERS:
        rule.append(
            f"rule of thumb {RULE_OF_THUMB_BYTES_PER_PARAMETER} B/param: {fmt_bytes(report.rule_of_thumb_bytes)}, "
            "without activations"
        )
    return [
        *rule,
        f"estimated peak at batch {first.batch_size}: {fmt_bytes(first.peak_allocated_bytes)} = "
        + " + ".join(f"{label} {fmt_bytes(n)}" for label, n in terms),
    ]


def layer_lines(layers: tuple[LayerRow, ...]) -> list[str]:
    """The layer table: each module indented by depth, its own parameters, what it saves for the backward pass
    (its children's included) and what checkpointing it would save."""
    rows = [["layer", "type", "parameters", "bytes", "saved for backward", "checkpointing saves"]]
    for row in layers:
        rows.append(
            [
                "  " * row.depth + (printable(row.name) or "(model)"),
                printable(row.kind),
                f"{row.parameters:,}",
                fmt_bytes(row.parameter_bytes),
                fmt_bytes(row.saved_bytes),
                "" if row.checkpoint_saves_bytes is None else fmt_bytes(row.checkpoint_saves_bytes),
            ]
        )
    return aligned(rows, right={2, 3, 4, 5})


def report_to_dict(report: Report) -> dict[str, Any]:
    """The JSON document: stable keys, every size an integer number of bytes."""
    return {
        "schema": SCHEMA,
        "model": report.model,
        "parameters": report.parameters,
        "settings": dataclasses.asdict(report.settings),
        "batches": [_batch_to_dict(b) for b in report.batches],
        "largest_batch": report.largest_batch,
        "search_estimates": report.search_estimates,
        "rule_of_thumb_bytes": report.rule_of_thumb_bytes,
        "layers": None if report.layers is None else [dataclasses.asdict(row) for row in report.layers],
        "checkpointed": report.checkpointed,
        "flops_per_step": report.flops_per_step,
        "step_time": None if report.step_time is None else dataclasses.asdict(report.step_time),
    }


def _batch_to_dict(batch: BatchEstimate) -> dict[str, Any]:
    return {
        "batch_size": batch.batch_size,
        "at_peak": batch.at_peak.as_dict(),
        "held": batch.held.as_dict(),
        "peak_allocated_bytes": batch.peak_allocated_bytes,
        "cuda_allocated_bytes": batch.cuda_allocated_bytes,
        "reserved_bytes": batch.reserved_bytes,
        "nvml_bytes": batch.nvml_bytes,
        "fits": batch.fits,
        "gathered_bytes": batch.gathered_bytes,
    }
