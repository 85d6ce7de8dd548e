"""The text of the training panel: a two-line summary for the dashboard, and the whole panel, from one view.

Pure functions of a ``TrainingView``, its sparklines, the width and a palette (the GPU cards' ``Palette``), so the
panel is tested without a terminal. A number that is unknown reads ``N/A`` with its reason, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from gputop.advisor.thresholds import DATA_WAIT_CRITICAL, DATA_WAIT_WARNING
from gputop.formatting import NA, counted, fmt_percent
from gputop.frozen import immutable
from gputop.model import MEASURING, PROBE_NONE, PROBE_OK, PROBE_STALE, LoaderView, ProbeReport, Snapshot, TrainingView
from gputop.sanitize import printable
from gputop.ui.text.bars import meter
from gputop.ui.text.gpu import Palette
from gputop.ui.text.loader import loader_config_parts
from gputop.ui.text.memory import breakdown_lines, compact_cuda, cuda_lines
from gputop.ui.text.parts import LABEL_CELLS, flow, label, na, pin_words
from gputop.ui.text.step import PhaseStyles, step_lines, summary_step_line
from gputop.ui.text.worker import WORKER_ROWS_INLINE, compact_workers, worker_lines

SPARK_MAX = 40
STALL_S = 1.0
"""A loop blocked on one batch this long is stalled, not just waiting: the panel says so."""
NO_REPORT = "no report: start the job with gputop run, or call gputop.probe.install() in it"
TWO_COLUMNS_MIN = 150
"""From this width the full panel puts the workers and GPU memory beside the pipeline, not below it."""
COLUMN_GAP = 3


@immutable
class TrainingSparks:
    """The panel's history lines, already sized: data wait %, steps/s and samples/s."""

    wait: str = ""
    steps: str = ""
    samples: str = ""


def spark_width(width: int, detailed: bool) -> int:
    """How many cells of a line go to a sparkline: a quarter of a wide panel, a short one in the summary."""
    if detailed:
        return 0 if width < 64 else min(SPARK_MAX, width // 4)
    return 0 if width < 70 else min(24, (width - 60) // 2 + 8)


def title(view: TrainingView, final: bool = False) -> str:
    """``Training · PID 4242 python · rank 0 of 8 · probe ok``, and ``· final`` once its job has ended."""
    parts = ["Training", f"PID {view.pid}" + (f" {view.name}" if view.name else "")]
    probe = view.probe
    if probe.rank is not None:
        parts.append(f"rank {probe.rank}" + (f" of {probe.world_size}" if probe.world_size is not None else ""))
    parts.append(f"probe {probe.status}")
    if final:
        parts.append("final")
    return " " + " · ".join(parts) + " "


def probe_words(probe: ProbeReport) -> str:
    """What the probe status means, honestly: an old report is stale, a missing one says how to get one."""
    if probe.status == PROBE_OK:
        return "report " + (f"age {NA}" if probe.age_s is None else f"{probe.age_s:.1f} s old")
    if probe.status == PROBE_NONE:
        return probe.reason or NO_REPORT
    if probe.status == PROBE_STALE:
        return f"{probe.reason or 'not rewritten lately'}: the job may be frozen, its numbers are not shown"
    return probe.reason or "no reason given"


def _probe_pointer(probe: ProbeReport, room: int) -> str:
    """``probe_words`` where they fit whole; else a few words that say where they are (the summary has one line for
    them: a hint cut in the middle would hide the half that says what to do)."""
    words = probe_words(probe)
    if cell_len(words) <= room:
        return words
    return (
        "no probe report: l says how to get one" if probe.status == PROBE_NONE else f"probe {probe.status}: l says why"
    )


def missing_reason(view: TrainingView, name: str) -> str:
    """Why the active DataLoader's ``name`` (``data_wait_share``, ``steps_per_s``, ...) is unknown."""
    if not view.probe.ok:
        return f"probe {view.probe.status}"
    loader = view.loader
    if loader is None:
        return "no DataLoader iterated yet"
    if name in loader.unavailable:
        return loader.unavailable[name]
    if name == "samples_per_s" and loader.steps_per_s is not None:
        return "no batch_size: custom batch_sampler"
    return MEASURING


def _loader(view: TrainingView) -> LoaderView | None:
    return view.loader if view.probe.ok else None


def wait_style(share: float | None, p: Palette) -> Style:
    """The advisor's thresholds: amber where the input pipeline is the bottleneck, red where it dominates."""
    if share is not None and share >= DATA_WAIT_CRITICAL:
        return p.crit
    return p.warn if share is not None and share >= DATA_WAIT_WARNING else p.fill


def _rate(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _number(view: TrainingView, name: str, unit: str, p: Palette) -> Text:
    loader = _loader(view)
    value = None if loader is None else getattr(loader, name)
    if value is None:
        return na(missing_reason(view, name), p)
    return Text(_rate(value) + unit)


def summary_lines(
    view: TrainingView, sparks: TrainingSparks, width: int, p: Palette, phases: PhaseStyles | None = None
) -> list[Text]:
    """Two lines for the dashboard: data wait and throughput; workers, pinning, main thread, GPU memory. A third
    between them where the probe times the steps: the step's phases, MFU and energy (``phases``: their styles)."""
    loader = _loader(view)
    share = None if loader is None else loader.data_wait_share
    first = label("DATA WAIT ", p, 0)
    if share is None:
        first.append_text(na(missing_reason(view, "data_wait_share"), p))
    else:
        first.append_text(meter(share, 10 if width < 100 else 16, wait_style(share, p), p.track))
        first.append(f" {fmt_percent(share * 100):>4}")
        if sparks.wait:
            first.append("  " + sparks.wait, style=p.spark)
    for name, unit in (("steps_per_s", " steps/s"), ("samples_per_s", " samples/s")):
        if loader is not None and getattr(loader, name) is not None:
            first.append("   ")
            first.append_text(_number(view, name, unit, p))
    if view.probe.status != PROBE_OK:
        first.append(f"  {_probe_pointer(view.probe, width - first.cell_len - 2)}", style=p.dim)
    second = label("WORKERS ", p, 0)
    second.append_text(compact_workers(view, p))
    pin, pin_style = pin_words(view.pin_memory.state, p)
    second.append("  pin ", style=p.label)
    second.append(pin, style=pin_style)
    if loader is not None and "pin_memory" in loader.overridden:
        second.append(f" (asked {loader.requested.pin_memory})", style=p.warn)
    second.append("  main ", style=p.label)
    second.append(view.main_thread.activity or NA, style=p.dim if view.main_thread.activity is None else "")
    cuda = compact_cuda(view, p)
    if cuda is not None:
        second.append("  ")
        second.append_text(cuda)
    for line in (first, second):
        line.truncate(width, overflow="ellipsis")
    step = summary_step_line(view, width, p, phases or {})
    return [first, second] if step is None else [first, step, second]


def column_width(width: int) -> int:
    """The width of one column of the full panel: the whole width, or half of it where two columns fit."""
    return (width - COLUMN_GAP) // 2 if width >= TWO_COLUMNS_MIN else width


def panel_lines(
    view: TrainingView,
    sparks: TrainingSparks,
    gpu_totals: Mapping[int, int],
    width: int,
    p: Palette,
    worker_rows: int = WORKER_ROWS_INLINE,
    phases: PhaseStyles | None = None,
    step_in_full: bool = False,
) -> list[Text]:
    """The whole panel: pipeline numbers with history, the DataLoader's settings, pinning, the main thread, the
    probe; then the workers one by one and GPU memory as PyTorch sees it, beside the rest where two columns fit.
    ``gpu_totals``: the memory of each GPU index. ``sparks`` are sized for ``column_width(width)``. The step's
    anatomy, where the probe times the steps, comes first: it answers where the step's time goes (``step_in_full``:
    with its syncs, FLOPs, MFU and energy, as the training screen has it)."""
    cells = column_width(width)
    spark_cells = len(sparks.wait) + 2 if sparks.wait else 0
    bar = max(6, min(30, cells - LABEL_CELLS - 30 - spark_cells))
    left = step_lines(view, cells - LABEL_CELLS, cells, p, phases or {}, step_in_full)
    left += _pipeline_lines(view, sparks, bar, cells, p)
    right = worker_lines(view, bar, cells, p, worker_rows)
    if view.probe.ok:
        right += breakdown_lines(view.probe, cells, bar, p)
        right += cuda_lines(view.probe, gpu_totals, bar, cells, p)
    for line in left + right:
        line.truncate(cells, overflow="ellipsis")
    if cells == width:
        return left + right
    lines = []
    for n in range(max(len(left), len(right))):
        line = left[n].copy() if n < len(left) else Text()
        line.pad_right(cells + COLUMN_GAP - line.cell_len)
        if n < len(right):
            line.append_text(right[n])
        lines.append(line)
    return lines


def _pipeline_lines(view: TrainingView, sparks: TrainingSparks, bar: int, width: int, p: Palette) -> list[Text]:
    loader = _loader(view)
    wait = _wait_info(view, loader, bar, p)
    stall = _stall(loader, p)
    # A stall matters most when there is one: beside the data wait where it fits whole, else on a line below.
    beside = stall is not None and LABEL_CELLS + wait.cell_len + 3 + stall.cell_len + _spark_cells(sparks.wait) <= width
    if stall is not None and beside:
        wait.append("   ").append_text(stall)
    lines = [
        _spark_line(label("DATA WAIT", p), wait, sparks.wait, width, p),
        _spark_line(label("STEPS/S", p), _steps_info(view, loader, p), sparks.steps, width, p),
        _spark_line(label("SAMPLES/S", p), _samples_info(view, loader, p), sparks.samples, width, p),
    ]
    if stall is not None and not beside:
        lines += flow(label("", p), [stall], width)
    if loader is not None:
        built = [Text(f"built at {printable(loader.created_at)}", style=p.dim)] if loader.created_at else []
        lines += flow(label("LOADER", p), loader_config_parts(loader, p) + built, width)
    pin, pin_style = pin_words(view.pin_memory.state, p)
    pin_line = label("PIN MEMORY", p).append(pin, style=pin_style)
    lines += flow(pin_line, [Text(view.pin_memory.evidence, style=p.dim)] if view.pin_memory.evidence else [], width)
    lines += flow(label("MAIN THREAD", p), _main_parts(view, p), width)
    lines += flow(label("PROBE", p), _probe_parts(view.probe, p), width)
    return lines


def _spark_cells(spark: str) -> int:
    return len(spark) + 2 if spark else 0


def _stall(loader: LoaderView | None, p: Palette) -> Text | None:
    """``blocked on this batch for 3.2 s`` once the loop has waited ``STALL_S`` for one batch."""
    if loader is None or loader.waiting_now_s is None or loader.waiting_now_s < STALL_S:
        return None
    return Text(f"blocked on this batch for {loader.waiting_now_s:.1f} s", style=p.warn)


def _spark_line(head: Text, info: Text, spark: str, width: int, p: Palette) -> Text:
    """``LABEL info`` with the sparkline flush right, so the three history lines line up."""
    head.append_text(info)
    if spark:
        head.truncate(max(0, width - _spark_cells(spark)), overflow="ellipsis", pad=True)
        head.append("  " + spark, style=p.spark)
    return head


def _wait_info(view: TrainingView, loader: LoaderView | None, bar: int, p: Palette) -> Text:
    share = None if loader is None else loader.data_wait_share
    if share is None:
        return na(missing_reason(view, "data_wait_share"), p)
    info = meter(share, bar, wait_style(share, p), p.track)
    info.append(f" {fmt_percent(share * 100):>4}", style=wait_style(share, p) if share >= DATA_WAIT_WARNING else "")
    info.append(" of the step time", style=p.dim)
    return info


def _steps_info(view: TrainingView, loader: LoaderView | None, p: Palette) -> Text:
    info = _number(view, "steps_per_s", "", p)
    if loader is not None:
        info.append(f"   epoch {loader.passes} · {counted(loader.batches, 'batch', 'batches')}", style=p.dim)
    return info


def _samples_info(view: TrainingView, loader: LoaderView | None, p: Palette) -> Text:
    info = _number(view, "samples_per_s", "", p)
    if loader is not None and loader.pass_start_s is not None:
        info.append(f"   epoch's first batch after {loader.pass_start_s:.2f} s", style=p.dim)
    return info


def _main_parts(view: TrainingView, p: Palette) -> list[Text]:
    main = view.main_thread
    if main.activity is None:
        return [na(main.unavailable.get("status") or main.unavailable.get("busy_share") or MEASURING, p)]
    parts = [Text(main.activity, style="bold")]
    parts.append(Text("busy ") + Text(fmt_percent(None if main.busy_share is None else main.busy_share * 100)))
    if main.wait_channel:
        parts.append(Text(f"{main.status or 'sleeping'} in {main.wait_channel}", style=p.dim))
    elif main.status:
        parts.append(Text(main.status, style=p.dim))
    cpu = main.cpu_percent
    reason = main.unavailable.get("cpu_percent", MEASURING)
    parts.append(Text("CPU ") + (na(reason, p) if cpu is None else Text(f"{cpu:.0f}%")))
    return parts


def _probe_parts(probe: ProbeReport, p: Palette) -> list[Text]:
    style = p.fill if probe.ok else p.dim if probe.status == PROBE_NONE else p.warn
    parts = [Text(probe.status, style=style), Text(probe_words(probe), style=p.dim)]
    if probe.ok and probe.torch_version:
        parts.append(Text(f"torch {probe.torch_version}", style=p.dim))
    if probe.failures:
        parts.append(Text(f"{probe.failures} probe errors, last: {probe.last_failure or NA}", style=p.warn))
    return parts


def gpu_totals(snap: Snapshot) -> tuple[tuple[int, int], ...]:
    """``(GPU index, memory total)`` of every GPU whose total is known: the scale of the CUDA memory bar."""
    return tuple((g.index, g.memory_total_bytes) for g in snap.gpus if g.memory_total_bytes)
