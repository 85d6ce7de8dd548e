"""The host: CPU (total, and per core where there is room), load, memory and swap."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from gputop.formatting import NA, counted, fmt_bytes, fmt_percent
from gputop.frozen import immutable
from gputop.model import HostInfo
from gputop.ui.text.bars import core_columns, meter
from gputop.ui.text.process_cells import MEASURING_MARK
from gputop.ui.widgets.drawing import TextLines


@immutable
class HostView:
    """What the panel draws; equal views draw the same."""

    host: HostInfo
    width: int
    per_core: bool


def _fraction(used: int, total: int) -> float | None:
    return used / total if total else None


class HostPanel(TextLines, Widget):
    """One line of host totals, and a second with one column per core when asked and the cores fit."""

    DEFAULT_CSS = """
    HostPanel { height: auto; padding: 0 1; }
    HostPanel > .host-panel--label { color: $text-muted; }
    HostPanel > .host-panel--fill { color: $secondary; }
    HostPanel > .host-panel--track { color: $foreground 25%; }
    HostPanel > .host-panel--dim { color: $text-disabled; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "host-panel--label",
        "host-panel--fill",
        "host-panel--track",
        "host-panel--dim",
    }

    view: reactive[HostView | None] = reactive(None, repaint=False)
    """Not repainted as a whole on a change: ``watch_view`` repaints the lines that differ."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._host: HostInfo | None = None
        self.per_core = True

    def show(self, host: HostInfo) -> None:
        self._host = host
        self._update_view()

    def set_per_core(self, per_core: bool) -> None:
        """Whether the per-core line may be drawn (the dashboard turns it off when height is short)."""
        self.per_core = per_core
        self._update_view()

    def on_resize(self) -> None:
        self._update_view()

    def _update_view(self) -> None:
        if self._host is not None and self.is_mounted:
            self.view = self._view_at(self._host, self.inner_size.width)

    def _view_at(self, host: HostInfo, width: int) -> HostView:
        # Decided by the core count, not by the readings, which the first tick does not have yet.
        return HostView(host, width, self.per_core and host.cpu_count <= width - 10)

    def watch_view(self, old: HostView | None, new: HostView | None) -> None:
        if old is None or new is None or old.per_core != new.per_core:
            self.refresh(layout=True)
        else:
            self.repaint_changed_lines(self._drawn[1])

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # The width the layout gives, before the frame is drawn: a view made before the first layout (0 wide, so
        # no per-core line) is made at this width now, so the first frame shows the panel as it stays (as a GPU
        # card's, gpu_card.py).
        if self.view is not None and self.view.width != width:
            self.set_reactive(HostPanel.view, self._view_at(self.view.host, width))
        return 2 if self.view is not None and self.view.per_core else 1

    def text_key(self) -> object:
        return self.view

    def text_lines(self, width: int) -> list[Text]:
        view = self.view
        if view is None or view.width <= 0:
            return []
        style = self.component_style
        label, fill, track, dim = (style(f"host-panel--{n}") for n in ("label", "fill", "track", "dim"))
        host = view.host
        narrow = view.width < 110

        def value(text: str) -> Text:
            return Text(text, style=dim if text == NA else Style())

        cpu = host.cpu_percent
        cpu_info = value(fmt_percent(cpu).rjust(4))
        if not narrow:
            usable = host.usable_cpu_count
            cpus = counted(host.cpu_count, "CPU")
            cpu_info.append(f" of {cpus if usable >= host.cpu_count else f'{usable} usable of {cpus}'}", style=label)
        cpu_info.append("  load ", style=label)
        loads = host.load_average[:1] if narrow and host.load_average else host.load_average
        cpu_info.append_text(value(NA if loads is None else " ".join(f"{x:.2f}" for x in loads)))
        slash = "/" if narrow else " / "
        memory = Text(f"{fmt_bytes(host.memory_used_bytes)}{slash}{fmt_bytes(host.memory_total_bytes)}")
        swap = Text(f"{fmt_bytes(host.swap_used_bytes)}{slash}{fmt_bytes(host.swap_total_bytes)}")
        # Bars share what the words leave: CPU, MEM, and SWAP unless narrow.
        bars = 2 if narrow else 3
        words = 4 + 1 + cpu_info.cell_len + 7 + 1 + memory.cell_len + 8 + swap.cell_len + (0 if narrow else 1)
        bar = max(4, min(24, (view.width - words) // bars))
        line = Text("CPU ", style=label)
        line.append_text(meter(None if cpu is None else cpu / 100, bar, fill, track))
        line.append(" ")
        line.append_text(cpu_info)
        line.append("   MEM ", style=label)
        line.append_text(meter(_fraction(host.memory_used_bytes, host.memory_total_bytes), bar, fill, track))
        line.append(" ")
        line.append_text(memory)
        line.append("   SWAP ", style=label)
        if not narrow:
            line.append_text(meter(_fraction(host.swap_used_bytes, host.swap_total_bytes), bar, fill, track))
            line.append(" ")
        line.append_text(swap)
        line.truncate(view.width)
        if not view.per_core:
            return [line]
        cores = Text("per core  ", style=label)
        if host.cpu_percent_per_core:
            cores.append(core_columns(host.cpu_percent_per_core), style=fill)
        else:
            cores.append(MEASURING_MARK, style=dim)
        return [line, cores]
