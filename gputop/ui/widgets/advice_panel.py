"""The advisor's findings: one line each on the dashboard, in full on the training screen; absent when there are
none, so a healthy job shows no empty box."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from gputop.frozen import immutable
from gputop.model import Advice
from gputop.ui.text.advice import brief_lines, full_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.widgets.drawing import TextLines
from gputop.ui.widgets.titles import set_border_title

SIDES = 4
"""Cells around the text: border and padding on each side (the brief form pads under its top rule)."""


@immutable
class AdviceShown:
    """What the panel draws: the findings, in full or one line each (at most ``limit`` lines)."""

    advice: tuple[Advice, ...]
    full: bool = False
    show_pid: bool = False
    limit: int | None = None
    note: str = ""
    """Shown, dimmed, while there are no findings to show yet (a replay computing them); empty: no note."""
    final: bool = False
    """The job has ended: these are its findings as they stood at its end."""


def advice_title(advice: Sequence[Advice], full: bool, final: bool = False) -> str:
    count = f"{len(advice)} finding" + ("s" if len(advice) != 1 else "") + (" · final" if final else "")
    return f" Advice · {count} " if full else f" Advice · {count} · l: in full "


class AdvicePanel(TextLines, Widget):
    """Hidden while there is nothing to advise."""

    DEFAULT_CSS = """
    AdvicePanel {
        height: auto;
        padding: 0 1;
        border: round $warning 60%;
        border-title-color: $text;
        border-title-style: bold;
        display: none;
    }
    AdvicePanel.-brief { border: none; border-top: solid $warning 60%; padding: 0 2; }
    AdvicePanel.-shown { display: block; }
    AdvicePanel > .advice-panel--label { color: $text-muted; }
    AdvicePanel > .advice-panel--info { color: $text-primary; }
    AdvicePanel > .advice-panel--warn { color: $text-warning; }
    AdvicePanel > .advice-panel--crit { color: $text-error; }
    AdvicePanel > .advice-panel--dim { color: $text-disabled; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        f"advice-panel--{part}" for part in ("label", "info", "warn", "crit", "dim")
    }

    shown: reactive[AdviceShown] = reactive(lambda: AdviceShown(()))

    def watch_shown(self, old: AdviceShown, new: AdviceShown) -> None:
        self.set_class(bool(new.advice or new.note), "-shown")
        self.set_class(not new.full, "-brief")
        text = advice_title(new.advice, new.full, new.final) if new.advice else " Advice "
        if new.advice or new.note:
            set_border_title(self, text)
        before = len(self._drawn[1])
        if len(self.drawn_lines()) != before or old.full != new.full:
            self.refresh(layout=True)

    def line_count(self, outer_width: int) -> int:
        """How many lines the panel takes at ``outer_width`` cells wide, its border included (0 when hidden)."""
        if not (self.shown.advice or self.shown.note):
            return 0
        return (2 if self.shown.full else 1) + len(self._lines(max(0, outer_width - SIDES)))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.line_count_at(width)

    def text_key(self) -> object:
        return self.shown

    def text_lines(self, width: int) -> list[Text]:
        return self._lines(width)

    def _lines(self, width: int) -> list[Text]:
        shown = self.shown
        if width <= 0:
            return []
        style = self.component_style
        if not shown.advice:
            if not shown.note:
                return []
            note = Text(shown.note, style=style("advice-panel--dim"))
            note.truncate(width, overflow="ellipsis")
            return [note]
        palette = Palette(
            label=style("advice-panel--label"),
            spark=style("advice-panel--info"),
            warn=style("advice-panel--warn"),
            crit=style("advice-panel--crit"),
            dim=style("advice-panel--dim"),
        )
        if shown.full:
            return full_lines(shown.advice, width, palette)
        return brief_lines(shown.advice, width, palette, shown.show_pid, shown.limit)
