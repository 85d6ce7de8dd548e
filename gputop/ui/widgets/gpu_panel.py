"""All GPUs: cards in a grid when they fit, one line each when they do not (two or more side by side when there
are too many GPUs for one a line)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.css.scalar import Scalar

from gputop.model import Gpu, GpuProcess
from gputop.ui.history import History
from gputop.ui.text.gpu import card_line_count, in_mig, mig_process_counts
from gputop.ui.widgets.gpu_card import GpuCard

CARD_MIN_WIDTH = 72
"""Narrower than this, a card's bars and sparkline get too short to read."""
COMPACT_MIN_WIDTH = 80
"""A one-line GPU keeps its bars and readings down to this width (the 80-column layout)."""
CARD_GUTTER = 1
SIDE_BY_SIDE_GUTTER = 2
"""Cells between GPU lines side by side, so one's last reading does not run into the next one's index."""


def compact_lines(gpu: Gpu) -> int:
    """How many lines a GPU takes in the compact layout: its line, and one per MIG instance."""
    return 1 + (len(gpu.mig) if in_mig(gpu) else 0)


def choose_layout(gpus: Sequence[Gpu], width: int, height_budget: int) -> tuple[bool, int]:
    """``(compact, columns)``: cards in as many columns as fit the width, if their rows fit the height budget;
    else one line per GPU, in one column when they all fit the budget that way, or side by side (as many as the
    width holds at ``COMPACT_MIN_WIDTH`` each) when they do not, so many GPUs stay on screen."""
    if not gpus:
        return False, 1
    columns = max(1, min(len(gpus), width // CARD_MIN_WIDTH))
    card_height = 2 + max(card_line_count(g) for g in gpus)
    rows = math.ceil(len(gpus) / columns)
    if rows * card_height <= height_budget:
        return False, columns
    if sum(compact_lines(g) for g in gpus) <= height_budget:
        return True, 1
    return True, max(1, min(len(gpus), width // COMPACT_MIN_WIDTH))


class GpuPanel(Container, can_focus=True):
    """The GPU cards, kept in GPU index order; a card is added or removed only when a GPU appears or goes. When
    the GPUs do not all fit, the panel scrolls, and takes the focus (Tab) for its keys."""

    DEFAULT_CSS = """
    GpuPanel {
        layout: grid;
        grid-size: 1;
        grid-rows: auto;
        grid-gutter: 0 1;
        height: auto;
        overflow-y: auto;
        overflow-x: hidden;
    }
    GpuPanel:focus { scrollbar-color: $accent; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Scroll up", show=False),
        Binding("down", "scroll_down", "Scroll down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "First GPU", show=False),
        Binding("end", "scroll_end", "Last GPU", show=False),
    ]

    @property
    def focusable(self) -> bool:
        """Only while some GPUs are scrolled out of sight: otherwise Tab has nothing to show here."""
        return super().focusable and self.max_scroll_y > 0

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._gpus: tuple[Gpu, ...] = ()
        self._cards: list[GpuCard] = []
        self._budget = 0

    def show(self, gpus: Sequence[Gpu], history: History, now: float, processes: Sequence[GpuProcess] = ()) -> None:
        """Draw these GPUs (already narrowed to the ones to show); ``processes`` are counted per MIG instance."""
        if self.cards_change(gpus):
            compact, _ = self._layout(gpus)
            self.remove_children()
            self._cards = [GpuCard(g.index, compact) for g in gpus]
            self.mount_all(self._cards)
        self._gpus = tuple(gpus)
        self._arrange()
        for gpu, card in zip(gpus, self._cards):
            card.show(gpu, history.gpus.get(gpu.index), now, mig_process_counts(gpu, processes) if gpu.mig else ())

    def cards_change(self, gpus: Sequence[Gpu]) -> bool:
        """Whether showing ``gpus`` adds or removes cards (the next ``show`` makes them in the layout that the
        budget of the last ``fit_to`` gives)."""
        return [g.index for g in gpus] != [card.index for card in self._cards]

    def _layout(self, gpus: Sequence[Gpu]) -> tuple[bool, int]:
        return choose_layout(gpus, self.outer_size.width or self.app.size.width, self._budget)

    def fit_to(self, height_budget: int) -> None:
        """Use at most ``height_budget`` lines: cards if they fit, else one line per GPU, scrolling if needed."""
        self._budget = height_budget
        if self.styles.max_height != Scalar.from_number(max(1, height_budget)):
            self.styles.max_height = max(1, height_budget)
        self._arrange()

    def _arrange(self) -> None:
        compact, columns = self._layout(self._gpus)
        # Styles set here, not classes: a class on the panel restyles all its cards (64 of them on a large
        # machine). Setting a style, even to its current value, costs a whole-screen layout: only set changes.
        gutter = (SIDE_BY_SIDE_GUTTER if columns > 1 else 0) if compact else CARD_GUTTER
        if self.styles.grid_gutter_vertical != gutter:
            self.styles.grid_gutter_vertical = gutter
        if self.styles.grid_size_columns != columns:
            self.styles.grid_size_columns = columns
        for card in self._cards:
            if card.compact != compact:
                card.set_compact(compact)
