"""The replay's dashboard: the live one with the timeline bar above the footer and ``g`` to jump to a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input
from textual.worker import Worker

from gputop.ui.replay.jump import JumpInput
from gputop.ui.replay.time import JUMP_FORMS
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.timeline_bar import TimelineBar, TimelineView

if TYPE_CHECKING:
    from gputop.ui.replay.player import ReplayPlayer


class ReplayDashboardScreen(DashboardScreen):
    """The dashboard with the timeline bar above the footer and ``g`` to jump to a time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "jump", "Jump", tooltip=f"Jump to a time: {JUMP_FORMS}"),
        # Still there, and listed by ?, but out of the footer: its room at 80 columns goes to the replay's keys.
        Binding("slash", "filter", "Filter", show=False),
        Binding("t", "toggle_tree", "Tree", show=False),
        Binding("s", "next_sort", "Sort", show=False),
        # The replay's speed keys, as on every replay screen, rather than the dashboard's sort keys of htop's habit.
        Binding("less_than_sign", "app.mode('speed', -1)", "Slower", show=False),
        Binding("greater_than_sign", "app.mode('speed', 1)", "Faster", show=False),
    ]
    reserved_lines = TimelineBar.LINES

    def __init__(self, player: ReplayPlayer) -> None:
        super().__init__()
        self.player = player

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, Footer):
                yield TimelineBar()
                yield Footer(compact=True)  # room for the replay's keys at 80 columns
                yield JumpInput()  # after the footer, to be drawn over it
            else:
                yield widget

    def on_mount(self) -> None:
        self.show_timeline(self.player.timeline_view)
        self.set_track()

    def show_timeline(self, view: TimelineView) -> None:
        if self.is_mounted:
            self.query_one(TimelineBar).view = view

    def set_track(self) -> None:
        """The bar's strip: the recorded times, with the findings' marks once computed."""
        if not self.is_mounted:
            return
        player = self.player
        marks = player.findings.marks if player.findings is not None else None
        self.query_one(TimelineBar).set_track(player.source.times, marks, player.big_gap_s)

    def action_jump(self) -> None:
        self.query_one(JumpInput).open()

    @on(Input.Submitted, "#jump")
    def _jump(self, event: Input.Submitted) -> None:
        field = self.query_one(JumpInput)
        error = self.player.jump_text(event.value)
        if error:
            field.show_error(error)
        else:
            field.action_close()

    @on(TimelineBar.Seek)
    def _seek(self, event: TimelineBar.Seek) -> None:
        self.player.go(self.player.source.nearest(event.time))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.player.findings_changed(event)
