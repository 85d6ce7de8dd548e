"""One training job of several ranks: its findings on top, then a row per rank with the figures that tell the ranks
apart (step rate, data wait, the wait for the other ranks, GPU, workers), the straggler marked."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowKey

from gputop.jobs import find_jobs
from gputop.model import Advice, Snapshot
from gputop.ui.in_app import InGputopApp
from gputop.ui.process_rows import Column
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.targets.job import job_findings, straggler_mark
from gputop.ui.text.gpu import Palette
from gputop.ui.text.job import CELL_PADDING, job_columns, job_title, probe_hint, rank_cells, rank_rows
from gputop.ui.widgets.advice_panel import AdvicePanel, AdviceShown
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.titles import set_border_title

TALL_MIN_HEIGHT = 40
"""From this many lines the findings are shown in full when they take at most half the screen."""
BRIEF_LINES = 3
SCROLLBAR_CELLS = 1


class JobScreen(InGputopApp, Screen[None]):
    """Follows one job by its id (``gputop.jobs``); Esc (or ``j`` again) goes back to the overview."""

    DEFAULT_CSS = """
    JobScreen #job-gone { padding: 1 2; display: none; }
    JobScreen #job-note { height: auto; padding: 0 1; color: $text-muted; display: none; }
    JobScreen #job-ranks {
        height: 1fr;
        min-height: 4;
        border-top: solid $foreground 30%;
        border-title-color: $text;
        border-title-align: left;
        scrollbar-size-vertical: 1;
    }
    JobScreen #job-ranks:focus { border-top: solid $accent; }
    JobScreen #job-ranks > .datatable--header { text-style: bold; }
    JobScreen > .job-ranks--dim { color: $text-disabled; }
    JobScreen > .job-ranks--warn { color: $text-warning; }
    JobScreen > .job-ranks--crit { color: $text-error; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"job-ranks--dim", "job-ranks--warn", "job-ranks--crit"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace,j", "app.pop_screen", "Back", key_display="Esc", tooltip="Back to the overview"),
        Binding(
            "enter,l",
            "training",
            "Rank",
            key_display="⏎",
            tooltip="On the job screen: the training screen of the selected rank, its findings in full",
        ),
    ]

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id
        self._seen = False
        """Whether the job was ever in a snapshot: what tells "gone" from "not there yet"."""
        self._shape: tuple[tuple[Column, ...], tuple[int, ...]] = ((), ())
        self._cells: dict[int, tuple[object, ...]] = {}

    def compose(self) -> ComposeResult:
        yield StatusBar()
        yield AdvicePanel()
        yield Static(id="job-gone", markup=False)
        yield Static(id="job-note", markup=False)
        yield DataTable(id="job-ranks", cursor_type="row", zebra_stripes=False, cell_padding=CELL_PADDING)
        yield Footer()

    def on_mount(self) -> None:
        app = self.gputop
        self.watch(app, "snapshot", self._show)
        self.watch(app, "paused", self._show_status)
        self.watch(app, "interval_s", self._show_status)
        self.watch(app, "final", self._show_status, init=False)
        self.watch(app, "advice_note", self._show, init=False)
        self.query_one(DataTable).focus()

    def on_resize(self) -> None:
        self._show()

    @property
    def selected_pid(self) -> int | None:
        """The rank under the cursor."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return None if key.value is None else int(key.value)

    def _show_status(self) -> None:
        app = self.gputop
        self.query_one(StatusBar).show(app.snapshot, app.interval_s, app.paused, app.focus_pid)

    def _show(self) -> None:
        self._show_status()
        snap = self.gputop.snapshot
        if snap is None:
            return
        job = next((j for j in find_jobs(snap) if j.id == self.job_id), None)
        gone = self.query_one("#job-gone", Static)
        table = self.query_one(DataTable)
        if gone.display != (job is None):
            gone.display = job is None
            table.display = job is not None
        note = self.query_one("#job-note", Static)
        hint = "" if job is None else probe_hint(job)
        if note.content != hint:  # untouched when unchanged, to spare a repaint
            note.update(hint)
            note.display = bool(hint)
        if job is None:
            gone.update(self._missing_words(snap))
            self.query_one(AdvicePanel).shown = AdviceShown(())
            return
        self._seen = True
        findings = job_findings(self.gputop.advice, job)
        self._show_findings(findings)
        rows = rank_rows(job, snap, straggler_mark(findings, job))
        columns = job_columns(job, rows, max(0, table.size.width or self.size.width) - SCROLLBAR_CELLS)
        set_border_title(table, job_title(job, rows))
        palette = self._palette()
        self._fill(table, columns, [(row.pid, rank_cells(row, columns, palette)) for row in rows])

    def _show_findings(self, findings: tuple[Advice, ...]) -> None:
        """In full where they take at most half of a tall screen, else one line each (``l`` has them in full)."""
        panel = self.query_one(AdvicePanel)
        note = self.gputop.advice_note
        if self.size.height >= TALL_MIN_HEIGHT:
            panel.shown = AdviceShown(findings, full=True, note=note)
            if panel.line_count(self.size.width) <= self.size.height // 2:
                return
        panel.shown = AdviceShown(findings, show_pid=True, limit=BRIEF_LINES, note=note)

    def _missing_words(self, snap: Snapshot) -> str:
        if self._seen:
            return (
                f"Job {self.job_id} is no longer among the training processes gputop sees: its ranks have exited, "
                "or show no training evidence any more."
            )
        known = ", ".join(j.id for j in find_jobs(snap) if len(j.ranks) > 1)
        return f"No job {self.job_id} (yet): gputop looks for it again at every update." + (
            f" Jobs of several ranks here: {known}." if known else ""
        )

    def _fill(self, table: DataTable[object], columns: tuple[Column, ...], rows: list[tuple[int, tuple]]) -> None:
        """Rebuild the table when its columns or ranks changed, keeping the cursor on its rank; otherwise update the
        cells that changed, so the cursor and scroll stay put."""
        shape = (columns, tuple(pid for pid, _ in rows))
        if shape != self._shape:
            selected = self.selected_pid
            table.clear(columns=True)
            for column in columns:
                title = column.title.rjust(column.width) if column.right else column.title
                table.add_column(title, width=column.width, key=column.key)
            for pid, cells in rows:
                table.add_row(*cells, key=str(pid))
            if selected in shape[1]:
                table.move_cursor(row=shape[1].index(selected), animate=False)
            self._shape = shape
            self._cells = dict(rows)
            return
        for pid, cells in rows:
            before = self._cells.get(pid, ())
            for column, cell, was in zip(columns, cells, before):
                if cell != was:
                    table.update_cell(str(pid), column.key, cell)
            self._cells[pid] = cells

    def _palette(self) -> Palette:
        style = self.get_component_rich_style
        return Palette(
            dim=style("job-ranks--dim", partial=True),
            warn=style("job-ranks--warn", partial=True),
            crit=style("job-ranks--crit", partial=True),
        )

    @on(DataTable.RowSelected)
    def _open_rank(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(event.row_key)

    def action_training(self) -> None:
        pid = self.selected_pid
        if pid is not None:
            self.app.push_screen(TrainingScreen(pid))

    def _open(self, key: RowKey) -> None:
        if key.value is not None:
            self.app.push_screen(TrainingScreen(int(key.value)))
