"""The text of a training step's anatomy: a stacked bar of its phases, their legend, and what a step costs.

Pure functions of a ``TrainingView`` (its probe's ``StepAnatomy`` and the monitor's ``StepCost``), a width and
styles, so the training panel, the training screen, the job view and ``--once`` share them and are tested without a
terminal. Each phase has a letter as well as a colour: every segment of the bar starts with its letter in reverse
video, so the bar reads without colour. Phases the probe did not see are not drawn; a number that is unknown reads
``N/A`` with its reason, never 0. Sync sites come from the job's report: they are made printable before they are
shown, whatever the decoder did.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_percent
from gputop.frozen import immutable
from gputop.model import Phase, StepAnatomy, StepCost, TrainingView
from gputop.sanitize import printable
from gputop.ui.text.gpu import Palette
from gputop.ui.text.parts import flow, label, na

PhaseStyles = Mapping[Phase, Style]


@immutable
class PhaseName:
    """How a phase is shown: its letter in the bar, a short word for a narrow legend or a column, and in full."""

    letter: str
    short: str
    full: str


PHASE_NAMES: Mapping[Phase, PhaseName] = {
    "data": PhaseName("D", "data", "data wait"),
    "h2d": PhaseName("H", "h2d", "host-to-device copies"),
    "forward": PhaseName("F", "fwd", "forward"),
    "backward": PhaseName("B", "bwd", "backward"),
    "optimizer": PhaseName("O", "opt", "optimizer step"),
    "collective": PhaseName("C", "coll", "collectives"),
    "other": PhaseName("R", "rest", "rest (the job's own code)"),
}
"""The letter is the short word's first, so a legend of letters alone still says which phase is which."""
BAR_MIN = 12
"""A bar narrower than this hides the small phases: the summary then gives the phases in words instead."""
BAR_MAX = 48
SYNC_SITES_SHOWN = 5
"""Sync sites listed on the training screen, busiest first; the rest are counted."""
REASON_CELLS = 24
"""An N/A's reason in the one-line summary is cut to this: the training screen has it whole."""


def step_of(view: TrainingView) -> StepAnatomy | None:
    """The step's anatomy where the probe's report is current and has timed a step."""
    return view.probe.step if view.probe.ok else None


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds in at most five characters: ``0.42``, ``18.2``, ``312``, ``1,240``."""
    ms = seconds * 1000
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:,.0f}"


def fmt_tflop(flops: float) -> str:
    """FLOPs in the unit of a step's work on a GPU: ``3.21 TFLOP``, ``412 GFLOP``."""
    for scale, unit in ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if flops >= scale:
            value = flops / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"
    return f"{flops:,.0f} FLOP"


def _rate(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def letter_style(phase: Phase, styles: PhaseStyles) -> Style:
    """The phase's letter: its colour in reverse video, which stays visible without colour too."""
    return styles.get(phase, Style()) + Style(reverse=True, bold=True)


def phase_cells(step: StepAnatomy, width: int) -> list[tuple[Phase, int]]:
    """How many of ``width`` cells each measured phase gets, in proportion to its time (largest remainders
    first), every phase at least one cell where ``width`` allows, so a short phase keeps its letter."""
    phases = [(name, seconds) for name, seconds in step.phases_s if seconds >= 0]
    total = sum(seconds for _, seconds in phases)
    if width <= 0 or total <= 0:
        return []
    phases = [(name, seconds) for name, seconds in phases if seconds > 0]
    exact = [seconds / total * width for _, seconds in phases]
    cells = [int(e) for e in exact]
    for n in sorted(range(len(phases)), key=lambda n: exact[n] - cells[n], reverse=True)[: width - sum(cells)]:
        cells[n] += 1
    for n in range(len(phases) if width >= len(phases) else 0):
        if not cells[n]:  # a cell from the longest phase: it hardly shows there, and this one would not at all
            cells[cells.index(max(cells))] -= 1
            cells[n] = 1
    return [(name, c) for (name, _), c in zip(phases, cells, strict=True) if c > 0]


def phase_bar(step: StepAnatomy, width: int, styles: PhaseStyles, track: Style | str = "") -> Text:
    """The step as one bar ``width`` cells long: a segment per phase in its colour, its letter first."""
    bar = Text()
    for phase, cells in phase_cells(step, width):
        bar.append(PHASE_NAMES[phase].letter, style=letter_style(phase, styles))
        bar.append("█" * (cells - 1), style=styles.get(phase, Style()))
    if not bar.cell_len and width > 0:
        bar.append("░" * width, style=track)
    return bar


def legend(step: StepAnatomy, styles: PhaseStyles, words: bool = False) -> list[Text]:
    """A part per phase: its letter and its milliseconds (``F 18.2``); with ``words`` its short word too."""
    parts = []
    for phase, seconds in step.phases_s:
        name = PHASE_NAMES[phase]
        part = Text().append(name.letter, style=letter_style(phase, styles))
        part.append(f" {name.short} {fmt_ms(seconds)}" if words else f" {fmt_ms(seconds)}")
        parts.append(part)
    return parts


def cost_reason(view: TrainingView, name: str) -> str:
    """Why ``StepCost``'s ``name`` (``mfu``, ``energy_per_step_j``, ...) is unknown."""
    cost = view.cost
    if cost is not None and name in cost.unavailable:
        return cost.unavailable[name]
    step = step_of(view)
    if name in ("mfu", "achieved_tflops") and step is not None and step.flops_per_step is None:
        return step.unavailable.get("flops_per_step", "FLOPs per step not counted")
    return "not computed" if cost is None else "not reported"


def _cost(view: TrainingView) -> StepCost:
    return view.cost or StepCost()


def _short(reason: str) -> str:
    return reason if cell_len(reason) <= REASON_CELLS else reason[: REASON_CELLS - 1] + "…"


def mfu_part(view: TrainingView, p: Palette, brief: bool = False) -> Text:
    mfu = _cost(view).mfu
    part = label("MFU ", p, 0)
    if mfu is None:
        reason = cost_reason(view, "mfu")
        return part.append_text(na(_short(reason) if brief else reason, p))
    return part.append(fmt_percent(mfu * 100))


def energy_part(view: TrainingView, p: Palette, brief: bool = False) -> Text:
    joules = _cost(view).energy_per_step_j
    if joules is None:
        reason = cost_reason(view, "energy_per_step_j")
        return label("J/step ", p, 0).append_text(na(_short(reason) if brief else reason, p))
    return Text(f"{_joules(joules)} J", style="").append("/step", style=p.label)


def _joules(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def summary_step_line(view: TrainingView, width: int, p: Palette, styles: PhaseStyles) -> Text | None:
    """The dashboard summary's step line: ``STEP 52.1 ms`` and the bar, the phases' milliseconds where they fit,
    MFU and joules per step. Where no bar of ``BAR_MIN`` cells fits, the phases in words instead (``data 3.10 fwd
    18.2 …``), cut at the end, and the cost left to the training screen. None where the probe has timed no step."""
    step = step_of(view)
    if step is None:
        return None
    line = label("STEP ", p, 0).append(NA if step.step_s is None else f"{fmt_ms(step.step_s)} ms")
    loader = view.loader
    if step.steps_per_s is not None and (loader is None or loader.steps_per_s is None):
        line.append(f"  {_rate(step.steps_per_s)} steps/s")
    tail = _cost_tail(view, p, reasons=True)
    room = width - line.cell_len - tail.cell_len - 2
    if room < BAR_MIN:  # the phases matter more than why MFU or energy are unknown: l has the reasons
        tail = _cost_tail(view, p, reasons=False)
        room = width - line.cell_len - tail.cell_len - 2
    numbers = _joined(legend(step, styles))
    if not step.phases_s:
        line.append("  ").append_text(na(step.unavailable.get("phases_s", "no phase timed yet"), p))
    elif room >= BAR_MIN + 2 + numbers.cell_len:
        bar = min(BAR_MAX, room - 2 - numbers.cell_len)
        line.append("  ").append_text(phase_bar(step, bar, styles, p.track)).append("  ").append_text(numbers)
    elif room >= BAR_MIN:
        line.append("  ").append_text(phase_bar(step, min(BAR_MAX, room), styles, p.track))
    else:  # too narrow for a bar that shows the small phases: the phases in words, as many as fit, before the cost
        tail = Text()
        line.append("  ").append_text(_joined(legend(step, styles, words=True)))
    line.append_text(tail)
    line.truncate(width, overflow="ellipsis")
    return line


def _cost_tail(view: TrainingView, p: Palette, reasons: bool) -> Text:
    if reasons:
        return Text("  ").append_text(mfu_part(view, p, True)).append("  ").append_text(energy_part(view, p, True))
    cost = _cost(view)
    mfu = label("MFU ", p, 0).append(NA, style=p.dim) if cost.mfu is None else mfu_part(view, p)
    joules = Text(f"J/step {NA}", style=p.dim) if cost.energy_per_step_j is None else energy_part(view, p)
    return Text("  ").append_text(mfu).append("  ").append_text(joules)


def _joined(parts: list[Text], gap: str = " ") -> Text:
    return Text(gap).join(parts)


def step_lines(
    view: TrainingView, bar: int, width: int, p: Palette, styles: PhaseStyles, full: bool = True
) -> list[Text]:
    """The step section of the full panel: the bar (``bar`` cells) and each phase's milliseconds; with ``full``
    (the training screen) also each phase's share, the step's warm-up and drift, how it was timed, the syncs and
    their sites, FLOPs and TFLOP/s, MFU against its peak, and energy; without (the dashboard's panel, which must
    leave room for the rest) MFU and energy on one line. Empty where the probe has timed no step."""
    step = step_of(view)
    if step is None:
        return []
    lines = flow(label("STEP", p), _timing_parts(step, p, full), width)
    if step.phases_s:
        lines.append(label("", p).append_text(phase_bar(step, max(BAR_MIN, bar), styles, p.track)))
        phases = _phase_parts(step, styles, p) if full else legend(step, styles, words=True)
        lines += flow(label("PHASES" if full else "", p), phases, width)
    else:
        lines += flow(label("PHASES", p), [na(step.unavailable.get("phases_s", "no phase timed yet"), p)], width)
    if not full:
        return lines + flow(label("COST", p), [mfu_part(view, p, True), energy_part(view, p, True)], width)
    lines += flow(label("", p), [Text(_how_timed(step), style=p.dim)], width)
    lines += _sync_lines(step, width, p)
    lines += flow(label("FLOPS", p), _flops_parts(view, step, p), width)
    lines += flow(label("MFU", p), _mfu_parts(view, p), width)
    lines += flow(label("ENERGY", p), _energy_parts(view, p), width)
    return lines


def _timing_parts(step: StepAnatomy, p: Palette, full: bool) -> list[Text]:
    median = Text(NA if step.step_s is None else f"{fmt_ms(step.step_s)} ms", style="bold").append(
        " median", style=p.dim
    )
    parts = [median]
    if step.step_p95_s is not None:
        parts.append(Text(f"p95 {fmt_ms(step.step_p95_s)} ms"))
    if step.warmup_step_s is not None and full:
        parts.append(Text(f"warm-up {fmt_ms(step.warmup_step_s)} ms"))
    if step.drift is not None and full:
        parts.append(Text(f"drift ×{step.drift:.2f}"))
    if step.steps_per_s is not None:
        parts.append(Text(f"{_rate(step.steps_per_s)} steps/s"))
    if step.samples_per_s is not None and full:
        parts.append(Text(f"{_rate(step.samples_per_s)} samples/s"))
    return parts


def _phase_parts(step: StepAnatomy, styles: PhaseStyles, p: Palette) -> list[Text]:
    total = step.phase_total_s
    parts = []
    for phase, seconds in step.phases_s:
        name = PHASE_NAMES[phase]
        part = (
            Text().append(name.letter, style=letter_style(phase, styles)).append(f" {name.full} {fmt_ms(seconds)} ms")
        )
        if total > 0:
            part.append(f" {fmt_percent(seconds / total * 100)}", style=p.dim)
        parts.append(part)
    return parts


def _how_timed(step: StepAnatomy) -> str:
    clock = "the GPU's clock (CUDA events)" if step.clock == "cuda" else "the host's clock"
    boundary = "the next DataLoader batch" if step.boundary == "DataLoader" else "each optimizer step"
    window = f" · {step.window_steps} steps in the last {step.window_s:.0f} s" if step.window_s else ""
    return f"timed on {clock} · a step ends at {boundary}{window}"


def _sync_lines(step: StepAnatomy, width: int, p: Palette) -> list[Text]:
    if step.syncs_per_step is None:
        return flow(label("SYNCS", p), [na(step.unavailable.get("syncs_per_step", "not counted"), p)], width)
    head = Text(f"{step.syncs_per_step:.1f} per step")
    if step.sync_sampled_steps:
        head.append(f" (on {step.sync_sampled_steps} sampled steps)", style=p.dim)
    lines = flow(label("SYNCS", p), [head], width)
    sites = sorted(step.sync_sites, key=lambda s: -s.per_step)
    for site in sites[:SYNC_SITES_SHOWN]:
        where = Text(printable(site.call), style="bold").append(f" at {printable(site.site)}")
        lines += flow(label("", p), [where, Text(f"{site.per_step:.1f} per step", style=p.dim)], width)
    if len(sites) > SYNC_SITES_SHOWN:
        lines += flow(label("", p), [Text(f"and {len(sites) - SYNC_SITES_SHOWN} more sites", style=p.dim)], width)
    return lines


def _flops_parts(view: TrainingView, step: StepAnatomy, p: Palette) -> list[Text]:
    if step.flops_per_step is None:
        return [na(step.unavailable.get("flops_per_step", "not counted"), p)]
    parts = [Text(f"{fmt_tflop(step.flops_per_step)} per step")]
    if step.flops_source is not None:
        parts[0].append(f" ({step.flops_source})", style=p.dim)
    achieved = _cost(view).achieved_tflops
    parts.append(
        na(cost_reason(view, "achieved_tflops"), p) if achieved is None else Text(f"{achieved:,.1f} TFLOP/s achieved")
    )
    return parts


def _mfu_parts(view: TrainingView, p: Palette) -> list[Text]:
    cost = _cost(view)
    if cost.mfu is None:
        return [na(cost_reason(view, "mfu"), p)]
    part = Text(fmt_percent(cost.mfu * 100), style="bold")
    if cost.peak_tflops is not None:
        part.append(f" of {cost.peak_tflops:,.0f} TFLOP/s")
    if cost.precision:
        part.append(f" {printable(cost.precision)}")
    parts = [part]
    if cost.peak_source:
        parts.append(Text(f"peak: {printable(cost.peak_source)}", style=p.dim))
    return parts


def _energy_parts(view: TrainingView, p: Palette) -> list[Text]:
    cost = _cost(view)
    parts = []
    for value, unit, name in (
        (cost.energy_per_step_j, "J per step", "energy_per_step_j"),
        (cost.energy_per_sample_j, "J per sample", "energy_per_sample_j"),
    ):
        parts.append(na(cost_reason(view, name), p) if value is None else Text(f"{_joules(value)} {unit}"))
    if cost.energy_per_step_j is None and cost.energy_per_sample_j is None:
        parts = parts[:1]  # one reason says it: the same counter is missing for both
    if cost.power_w is not None:
        parts.append(Text(f"{cost.power_w:,.0f} W", style=p.dim))
    return parts


def step_words(view: TrainingView) -> str:
    """One line of plain words for ``--once``: ``step 52.1 ms: data 3.10 · fwd 18.2 · bwd 22.0 · rest 3.70 ms ·
    MFU 41% · 3.2 J/step``; "" where the probe has timed no step."""
    step = step_of(view)
    if step is None:
        return ""
    phases = " · ".join(f"{PHASE_NAMES[phase].short} {fmt_ms(seconds)}" for phase, seconds in step.phases_s)
    words = "step " + (NA if step.step_s is None else f"{fmt_ms(step.step_s)} ms")
    words += f": {phases} ms" if phases else f": phases {NA} ({step.unavailable.get('phases_s', 'not timed yet')})"
    cost = _cost(view)
    words += " · MFU " + (fmt_percent(cost.mfu * 100) if cost.mfu is not None else f"{NA} ({cost_reason(view, 'mfu')})")
    joules = cost.energy_per_step_j
    words += " · " + (
        f"{_joules(joules)} J/step" if joules is not None else f"energy {NA} ({cost_reason(view, 'energy_per_step_j')})"
    )
    return printable(words)
