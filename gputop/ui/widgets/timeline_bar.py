"""The replay's timeline, above the footer: where the snapshot on screen lies in the recording, play or pause,
the speed, and a strip across the width showing when the advisor had findings, with a cursor at the position.
A click on the strip jumps there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from gputop.formatting import fmt_clock, fmt_length, fmt_span
from gputop.ui.replay.time import column_of, column_time, fmt_speed, strip_marks
from gputop.ui.widgets.drawing import TextLines

MARK_CHARS = {None: " ", -1: "─", 0: "▂", 1: "▄", 2: "█"}
"""A gap in the recording, snapshots without findings, then info, warning and critical findings: the height says
the severity without colour."""
CURSOR_CHAR = "┃"


@dataclass(frozen=True)
class TimelineView:
    """What the bar draws, but the strip's data (``TimelineBar.set_track``)."""

    start: float = 0.0
    end: float = 0.0
    at: float = 0.0
    """The timeline time of the snapshot on screen (its own time, unless the clock was stepped back)."""
    clock: float = 0.0
    """The snapshot's own time, shown as the wall clock."""
    playing: bool = False
    speed: float = 1.0
    progress: float | None = None
    """The share of the findings computed so far; None once they are all there."""


class TimelineBar(TextLines, Widget):
    """Two lines: the position and state, then the strip of findings."""

    DEFAULT_CSS = """
    TimelineBar {
        dock: bottom;
        margin-bottom: 1;
        height: auto;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    TimelineBar > .timeline-bar--label { text-style: bold; color: $accent; }
    TimelineBar > .timeline-bar--muted { color: $text-muted; }
    TimelineBar > .timeline-bar--track { color: $text-disabled; }
    TimelineBar > .timeline-bar--info { color: $text-primary; }
    TimelineBar > .timeline-bar--warn { color: $text-warning; }
    TimelineBar > .timeline-bar--crit { color: $text-error; }
    TimelineBar > .timeline-bar--cursor { text-style: bold; color: $text; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        f"timeline-bar--{part}" for part in ("label", "muted", "track", "info", "warn", "crit", "cursor")
    }

    view: reactive[TimelineView] = reactive(TimelineView)

    class Seek(Message):
        """The strip was clicked: go to ``time``."""

        def __init__(self, time: float) -> None:
            super().__init__()
            self.time = time

    def __init__(self) -> None:
        super().__init__()
        self._times: Sequence[float] = ()
        self._marks: Sequence[int] | None = None
        self._max_gap_s = 0.0
        self._track_version = 0
        self._columns: tuple[tuple[int, int], list[int | None]] = ((-1, -1), [])

    def set_track(self, times: Sequence[float], marks: Sequence[int] | None, max_gap_s: float) -> None:
        """The timeline time of every snapshot, and the highest severity rank of its findings (-1: none); marks
        None while the findings are being computed. Snapshots more than ``max_gap_s`` apart leave a gap."""
        self._times = times
        self._marks = marks
        self._max_gap_s = max_gap_s
        self._track_version += 1
        self.refresh()

    LINES = 3
    """The lines the bar takes, its margin above the footer included."""

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.LINES - 1

    def text_key(self) -> object:
        return (self.view, self._track_version)

    def text_lines(self, width: int) -> list[Text]:
        return [self._position_line(width), self._strip_line(width)]

    def _position_line(self, width: int) -> Text:
        view = self.view
        label, muted = self.component_style("timeline-bar--label"), self.component_style("timeline-bar--muted")
        state = "▶ playing" if view.playing else "‖ paused"
        left = Text.assemble((state, label), " ", (fmt_speed(view.speed), label), "  ", fmt_clock(view.clock))
        left.append(f"  +{fmt_span(view.at - view.start)} / {fmt_length(view.end - view.start)}")
        computing: list[str | tuple[str, Style]] = (
            [] if view.progress is None else [(f"findings: computing {view.progress:.0%}", muted), "   "]
        )
        spans = (
            f"recorded {fmt_clock(view.start, with_date=True)} → {fmt_clock(view.end)}",
            f"{fmt_clock(view.start)} → {fmt_clock(view.end)}",
            "",
        )
        for span in spans:
            for findings in (computing, []):
                right = Text.assemble(*findings, (span, muted))
                if left.cell_len + right.cell_len + 2 <= width:
                    break
            else:
                continue
            break
        left.truncate(width, overflow="ellipsis")
        left.pad_right(max(0, width - left.cell_len - right.cell_len))
        left.append_text(right)
        return left

    def _strip_line(self, width: int) -> Text:
        view = self.view
        key = (width, self._track_version)
        if self._columns[0] != key:
            self._columns = (key, strip_marks(self._times, self._marks, width, self._max_gap_s))
        columns = self._columns[1]
        styles = {
            None: self.component_style("timeline-bar--track"),
            -1: self.component_style("timeline-bar--track"),
            0: self.component_style("timeline-bar--info"),
            1: self.component_style("timeline-bar--warn"),
            2: self.component_style("timeline-bar--crit"),
        }
        cursor = -1
        if self._times and width > 0:
            cursor = column_of(view.at, self._times[0], self._times[-1] - self._times[0], width)
        cursor_style = self.component_style("timeline-bar--cursor")
        line = Text()
        for column, mark in enumerate(columns):
            if column == cursor:
                line.append(CURSOR_CHAR, style=cursor_style)
            else:
                line.append(MARK_CHARS[mark], style=styles[mark])
        return line

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y != 1 or not self._times:
            return
        width = self.inner_size.width
        start, span = self._times[0], self._times[-1] - self._times[0]
        at = column_time(offset.x + 0.5, start, span, width)
        self.post_message(self.Seek(min(self._times[-1], max(start, at))))
