"""The training panel: one training process's input pipeline, as a two-line summary or in full."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from gputop.frozen import immutable
from gputop.model import PHASES, TrainingView
from gputop.ui.history import ProcessHistory
from gputop.ui.text.gpu import Palette
from gputop.ui.text.step import PhaseStyles, step_of
from gputop.ui.text.training import (
    TrainingSparks,
    column_width,
    panel_lines,
    spark_width,
    summary_lines,
    title,
)
from gputop.ui.text.worker import WORKER_ROWS_INLINE
from gputop.ui.widgets.drawing import TextLines
from gputop.ui.widgets.titles import set_border_title

SIDES = 4
"""Cells the panel takes around its text: a border and a padding cell on each side (the summary keeps the same
padding under its top rule, so the two forms line up)."""


@immutable
class TrainingShown:
    """What the panel draws; equal values draw the same. ``now`` moves the sparklines on."""

    view: TrainingView
    now: float
    gpu_totals: tuple[tuple[int, int], ...] = ()
    detailed: bool = False
    worker_rows: int = WORKER_ROWS_INLINE
    final: bool = False
    """The job has ended: this is its last view."""
    step_in_full: bool = False
    """The step's syncs, FLOPs, MFU and energy each on their lines, as the training screen has room for."""


class TrainingPanel(TextLines, Widget):
    """Shows ``TrainingShown``; the summary is a top rule and two lines, the full panel a bordered box."""

    DEFAULT_CSS = """
    TrainingPanel {
        height: auto;
        padding: 0 1;
        border: round $foreground 30%;
        border-title-color: $text;
        border-title-style: bold;
    }
    TrainingPanel.-summary { border: none; border-top: solid $foreground 30%; padding: 0 2; }
    TrainingPanel > .training-panel--label { color: $text-muted; }
    TrainingPanel > .training-panel--fill { color: $success; }
    TrainingPanel > .training-panel--warn { color: $warning; }
    TrainingPanel > .training-panel--crit { color: $error; text-style: bold; }
    TrainingPanel > .training-panel--track { color: $foreground 25%; }
    TrainingPanel > .training-panel--dim { color: $text-disabled; }
    TrainingPanel > .training-panel--spark { color: $accent; }
    TrainingPanel > .training-panel--phase-data { color: #e5c07b; }
    TrainingPanel > .training-panel--phase-h2d { color: #c678dd; }
    TrainingPanel > .training-panel--phase-forward { color: #61afef; }
    TrainingPanel > .training-panel--phase-backward { color: #56b6c2; }
    TrainingPanel > .training-panel--phase-optimizer { color: #98c379; }
    TrainingPanel > .training-panel--phase-collective { color: #e06c75; }
    TrainingPanel > .training-panel--phase-other { color: #9da5b4; }
    """
    # The phases' colours are fixed rather than the theme's: the theme has fewer distinct colours than there are
    # phases (its accent is its warning colour), and each segment's letter tells the phases apart anyway.
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        f"training-panel--{part}" for part in ("label", "fill", "warn", "crit", "track", "dim", "spark")
    } | {f"training-panel--phase-{phase}" for phase in PHASES}

    shown: reactive[TrainingShown | None] = reactive(None, repaint=False)
    """Not repainted as a whole on a change: ``watch_shown`` repaints the lines that differ."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.history: ProcessHistory | None = None

    def show(self, shown: TrainingShown | None, history: ProcessHistory | None) -> None:
        """Draw ``shown`` with the sparklines of ``history``; None hides the panel."""
        self.history = history
        self.shown = shown

    def watch_shown(self, old: TrainingShown | None, new: TrainingShown | None) -> None:
        if self.display != (new is not None):  # setting a style, even to its value, costs a layout
            self.display = new is not None
        if new is None:
            return
        self.set_class(not new.detailed, "-summary")
        set_border_title(self, title(new.view, new.final))  # holds the process's name
        before = self._drawn[1]
        if old is None or old.detailed != new.detailed:
            self.refresh(layout=True)
        else:
            self.repaint_changed_lines(before)

    def line_count(self, outer_width: int) -> int:
        """How many lines the panel takes at ``outer_width`` cells wide, its border included."""
        shown = self.shown
        if shown is None:
            return 0
        if not shown.detailed:
            return 3 if step_of(shown.view) is None else 4
        return 2 + len(self._lines(shown, max(0, outer_width - SIDES)))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.line_count_at(width)

    def text_key(self) -> object:
        return self.shown

    def text_lines(self, width: int) -> list[Text]:
        return self._lines(self.shown, width) if self.shown is not None else []

    def _palette(self) -> Palette:
        style = self.component_style
        parts = ("label", "fill", "warn", "crit", "track", "dim", "spark")
        return Palette(**{part: style(f"training-panel--{part}") for part in parts})

    def _phase_styles(self) -> PhaseStyles:
        return {phase: self.component_style(f"training-panel--phase-{phase}", partial=True) for phase in PHASES}

    def _lines(self, shown: TrainingShown, width: int) -> list[Text]:
        if width <= 0:
            return []
        cells = spark_width(column_width(width) if shown.detailed else width, shown.detailed)
        sparks = TrainingSparks()
        history = self.history
        if history is not None and cells:
            now = shown.now
            steps_top = max(history.steps_per_s.peak() or 0.0, 1e-9)
            samples_top = max(history.samples_per_s.peak() or 0.0, 1e-9)
            sparks = TrainingSparks(
                wait=history.data_wait_percent.sparkline(cells, now),
                steps=history.steps_per_s.sparkline(cells, now, steps_top),
                samples=history.samples_per_s.sparkline(cells, now, samples_top),
            )
        palette, phases = self._palette(), self._phase_styles()
        if not shown.detailed:
            return summary_lines(shown.view, sparks, width, palette, phases)
        totals = dict(shown.gpu_totals)
        return panel_lines(shown.view, sparks, totals, width, palette, shown.worker_rows, phases, shown.step_in_full)
