"""One GPU: a bordered card with bars and history, or a single line when room is short."""

from __future__ import annotations

from typing import ClassVar

from textual.geometry import Region, Size
from textual.reactive import var
from textual.strip import Strip
from textual.widget import Widget

from gputop.formatting import NA
from gputop.frozen import immutable
from gputop.model import GPU_OK, Gpu
from gputop.ui.history import GpuHistory
from gputop.ui.text.gpu import (
    Palette,
    Sparks,
    card_line_count,
    card_lines,
    compact_line,
    compact_mig_line,
    has_real_work,
    has_sm_activity,
    in_mig,
    mig_title,
    spark_width,
    state_label,
    subtitle,
    work_spark_width,
)
from gputop.ui.widgets.drawing import CachedComponentStyles, text_strip
from gputop.ui.widgets.titles import set_border_subtitle, set_border_title


@immutable
class CardView:
    """Everything a card draws. Equal views draw the same, so an unchanged GPU costs no repaint."""

    gpu: Gpu
    sparks: Sparks
    compact: bool
    width: int
    mig_processes: tuple[int, ...] = ()
    """How many processes run on each MIG instance, in the order of ``gpu.mig``."""

    @property
    def line_count(self) -> int:
        if self.compact:
            return 1 + (len(self.gpu.mig) if in_mig(self.gpu) else 0)
        return card_line_count(self.gpu)


class GpuCard(CachedComponentStyles, Widget):
    """A GPU card. ``show`` feeds it a reading; it repaints only when what it draws changes."""

    DEFAULT_CSS = """
    GpuCard {
        height: auto;
        padding: 0 1;
        border: round $foreground 30%;
        border-title-color: $text;
        border-title-style: bold;
        border-subtitle-color: $warning;
        border-subtitle-style: bold;
    }
    GpuCard.-lost { border: round $error; border-title-color: $error; }
    GpuCard.-warn { border: round $warning; border-title-color: $warning; }
    GpuCard.-compact { border: none; padding: 0; height: auto; }
    GpuCard > .gpu-card--label { color: $text-muted; }
    GpuCard > .gpu-card--fill { color: $success; }
    GpuCard > .gpu-card--warn { color: $warning; }
    GpuCard > .gpu-card--crit { color: $error; text-style: bold; }
    GpuCard > .gpu-card--track { color: $foreground 25%; }
    GpuCard > .gpu-card--dim { color: $text-disabled; }
    GpuCard > .gpu-card--spark { color: $accent; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpu-card--label",
        "gpu-card--fill",
        "gpu-card--warn",
        "gpu-card--crit",
        "gpu-card--track",
        "gpu-card--dim",
        "gpu-card--spark",
    }

    view: var[CardView | None] = var(None)
    """What the card draws; ``watch_view`` repaints just the lines that differ."""

    def __init__(self, index: int, compact: bool = False) -> None:
        # Made in the layout it is shown in: switching a mounted card restyles it (64 cards: a slow first frame).
        super().__init__(id=f"gpu-{index}", classes="-compact" if compact else None)
        self.index = index
        self._reading: tuple[Gpu, GpuHistory | None, float] | None = None
        self._mig_processes: tuple[int, ...] = ()
        self._strip_cache: tuple[object, list[Strip]] = (None, [])
        self.compact = compact

    def show(self, gpu: Gpu, history: GpuHistory | None, now: float, mig_processes: tuple[int, ...] = ()) -> None:
        """Take a new reading (and, on a MIG GPU, how many processes run on each instance)."""
        self._reading = (gpu, history, now)
        self._mig_processes = mig_processes
        if self.is_mounted:
            self._update_view()

    def set_compact(self, compact: bool) -> None:
        """Switch between the bordered card and the one-line row."""
        self.compact = compact
        self.set_class(compact, "-compact")
        if self.is_mounted:
            self._update_view()

    def on_mount(self) -> None:
        self._update_view()

    def on_resize(self) -> None:
        self._update_view()

    def _update_view(self) -> None:
        view = self._view_at(self.inner_size.width)
        if view is not None:
            self.view = view

    def _view_at(self, width: int) -> CardView | None:
        """What the card draws of its reading at content ``width``; None before the first reading."""
        if self._reading is None:
            return None
        gpu, history, now = self._reading
        sparks = Sparks()
        if history is not None:
            if self.compact:
                cells = min(30, max(0, width - 130))
                trend = history.sm_percent if has_sm_activity(gpu) else history.busy_percent
                sparks = Sparks(busy=trend.sparkline(cells, now))
            else:
                cells = spark_width(width)
                work_cells = work_spark_width(width) if has_real_work(gpu) else 0
                sparks = Sparks(
                    memory=history.memory_percent.sparkline(cells, now),
                    busy=history.busy_percent.sparkline(cells, now),
                    sm=history.sm_percent.sparkline(cells, now),
                    work=tuple((name, trend.sparkline(work_cells, now)) for name, trend in history.work.items()),
                )
        return CardView(gpu, sparks, self.compact, width, self._mig_processes)

    def watch_view(self, old: CardView | None, new: CardView | None) -> None:
        if new is None:
            return
        gpu = new.gpu
        title = f"{gpu.index}  {gpu.name or NA}  {state_label(gpu)}".rstrip()
        mig = mig_title(gpu)
        if mig:
            title += f"  {mig}"
        note = subtitle(gpu) if gpu.state == GPU_OK else ""
        set_border_title(self, title)  # the GPU's name comes from the driver, or from a remote host
        set_border_subtitle(self, note)
        self.set_class(gpu.state != GPU_OK or state_label(gpu) == "CRITICAL", "-lost")
        self.set_class(state_label(gpu) == "WARN", "-warn")
        before = self._strip_cache[1]
        after = self._strips()
        if old is None or len(before) != len(after):
            self.refresh(layout=True)
            return
        # Only the lines that changed: the borders and a steady line cost nothing on a tick.
        for y, (was, now) in enumerate(zip(before, after)):
            if was != now:
                self.refresh(Region(0, y, self.inner_size.width, 1))

    def _palette(self) -> Palette:
        style = self.component_style
        return Palette(
            label=style("gpu-card--label"),
            fill=style("gpu-card--fill"),
            warn=style("gpu-card--warn"),
            crit=style("gpu-card--crit"),
            track=style("gpu-card--track"),
            dim=style("gpu-card--dim"),
            spark=style("gpu-card--spark"),
        )

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # The layout gives the card its width here, before the frame is drawn. A card mounted with its reading
        # made its view 0 cells wide (nothing laid out yet) and would draw it empty until its resize event, a
        # frame later: its view is made at this width now, so the frame that first shows the card shows the
        # reading. Quietly: the card's title is already set, and a card laid out anew is drawn whole anyway.
        if self.view is not None and self.view.width != width:
            view = self._view_at(width)
            if view is not None:
                self.set_reactive(GpuCard.view, view)
        return self.view.line_count if self.view is not None else 1

    def render_line(self, y: int) -> Strip:
        strips = self._strips()
        return strips[y] if y < len(strips) else Strip.blank(self.inner_size.width, self.base_style())

    def _strips(self) -> list[Strip]:
        key = (self.view, self.style_generation)
        if self._strip_cache[0] != key:
            self._strip_cache = (key, self._draw(self.view))
        return self._strip_cache[1]

    def _draw(self, view: CardView | None) -> list[Strip]:
        if view is None or view.width <= 0:
            return []
        palette = self._palette()
        if view.compact:
            lines = [compact_line(view.gpu, view.sparks.busy, view.width, palette)]
            if in_mig(view.gpu):
                counts = view.mig_processes + (0,) * (len(view.gpu.mig) - len(view.mig_processes))
                lines += [compact_mig_line(m, n, view.width, palette) for m, n in zip(view.gpu.mig, counts)]
        else:
            lines = card_lines(view.gpu, view.sparks, view.width, palette, view.mig_processes)
        return [text_strip(line, view.width, self.base_style(), self.app.console) for line in lines]
