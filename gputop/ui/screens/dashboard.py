"""The main screen: status line, banner, GPUs, host, the training panel and the advisor's findings, and the
process table with its view options."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Input, Static

from gputop.collect.slurm_allocation import allocation_notice, job_gpu_indices, job_gpus_first
from gputop.model import Snapshot
from gputop.ui.in_app import InGputopApp
from gputop.ui.process_rows import (
    COLUMNS,
    ProcessRow,
    ViewOptions,
    any_container,
    any_mig,
    any_pod,
    build_rows,
    column_for,
    flat_rows,
    focus_gpus,
)
from gputop.ui.targets.training import training_target
from gputop.ui.text.training import gpu_totals
from gputop.ui.widgets.advice_panel import AdvicePanel, AdviceShown
from gputop.ui.widgets.banner import Banner, screen_messages
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.host_panel import HostPanel
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.titles import set_border_title
from gputop.ui.widgets.training_panel import TrainingPanel, TrainingShown

TABLE_MIN_LINES = 8
"""The process table keeps at least its title, header and six rows; the GPU panel gets the rest."""
PER_CORE_MIN_HEIGHT = 30
DETAILED_TRAINING_MIN_HEIGHT = 40
"""With a focus (``--pid``, ``gputop run``) and this many lines, the training panel is shown in full."""


def options_summary(options: ViewOptions, shown: int) -> str:
    """The table's title: how many rows and which view options are on, so nothing hides silently."""
    column = column_for(options.sort_key)
    arrow = "▼" if column.descending != options.reverse else "▲"
    parts = [f"Processes {shown}", f"sort {column.title} {arrow}"]
    if options.tree:
        parts.append("tree")
    if options.filter_text:
        parts.append(f'filter "{options.filter_text}"')
    if options.compute_only:
        parts.append("compute only")
    if options.mine_only:
        parts.append(f"{options.user}'s only")
    return " " + " · ".join(parts) + " "


class DashboardScreen(InGputopApp, Screen[None]):
    """Shows ``app.snapshot``; every key here changes only how the table is viewed, never the sampling."""

    # htop's keys (and nvitop's, which follows htop) do here what they do there where gputop has the same thing:
    # F3 and F4 (search, filter) filter, F5 is the tree, F6 the sort menu, F9 the signal dialog, M and P sort by
    # memory and CPU, < and > move the sort column, I inverts it.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Filter processes by PID, user, name or command (F3, F4 too)",
        ),
        Binding("escape", "clear_filter", "Clear filter", show=False, key_display="Esc", tooltip="Clear the filter"),
        Binding("t", "toggle_tree", "Tree", tooltip="Tree view: parents, children and DataLoader workers (F5 too)"),
        Binding("s", "next_sort", "Sort", tooltip="Sort by the next column (or click a column title)"),
        Binding(
            "f6", "sort_menu", "Sort by", show=False, key_display="F6", tooltip="Sort by a column chosen from a list"
        ),
        Binding("M", "sort_by('gpu_mem')", "GPU memory", show=False, tooltip="Sort by GPU memory, largest first"),
        Binding("P", "sort_by('cpu')", "CPU", show=False, tooltip="Sort by %CPU, largest first"),
        Binding(
            "less_than_sign",
            "sort_step(-1)",
            "Sort left",
            show=False,
            key_display="< >",
            tooltip="Sort by the column to the left, or (>) to the right",
        ),
        Binding("greater_than_sign", "sort_step(1)", "Sort right", show=False),
        Binding("r", "reverse_sort", "Reverse", show=False, tooltip="Reverse the sort order (I too)"),
        Binding("c", "toggle_compute", "Compute only", show=False, tooltip="Show compute processes only"),
        Binding("m", "toggle_mine", "Mine only", show=False, tooltip="Show my processes only"),
        Binding(
            "k",
            "signal",
            "Signal",
            tooltip="Send SIGINT, SIGTERM or SIGKILL to the selected process, asking first (F9 too)",
        ),
        Binding(
            "l",
            "training",
            "Training",
            tooltip="The training process in full: DataLoader, every worker, GPU memory, the advisor's findings",
        ),
        # Out of the footer, whose room at 80 columns is taken; the key help lists it.
        Binding(
            "j",
            "job",
            "Job",
            show=False,
            tooltip="The job of the selected process: its ranks side by side, the straggler marked, its findings",
        ),
        # htop's keys for the same actions, out of the footer: the tooltips above name them for the key help.
        Binding("f3,f4", "filter", "Filter", show=False),
        Binding("f5", "toggle_tree", "Tree", show=False),
        Binding("I", "reverse_sort", "Reverse", show=False),
        Binding("f9", "signal", "Signal", show=False),
    ]

    options: var[ViewOptions] = var(ViewOptions)
    training_pid: var[int | None] = var(None)
    """The training process the training panel shows (``training_target``), None while there is none."""
    reserved_lines = 0
    """Lines taken by what a subclass docks above the footer (the replay's timeline bar)."""
    _flat: tuple[Snapshot | None, list[ProcessRow]] = (None, [])
    """The snapshot's flat rows before filtering and sorting (``flat_rows``)."""

    def compose(self) -> ComposeResult:
        yield StatusBar()
        yield Banner()
        yield GpuPanel()
        yield HostPanel()
        yield TrainingPanel()
        yield AdvicePanel()
        yield Static(id="process-note", markup=False)
        yield ProcessTable()
        yield Footer()
        # After the footer: both are docked at the bottom, and the later one is drawn over the other.
        yield Input(placeholder="filter: PID, user, name or command  (⏎ keep, Esc clear)", id="filter")

    def on_mount(self) -> None:
        app = self.gputop
        focus = app.focus_pid
        self.set_reactive(DashboardScreen.options, ViewOptions(user=app.user, focus_pid=focus, tree=focus is not None))
        self.watch(app, "snapshot", self._show_snapshot)
        self.watch(app, "paused", self._show_status)
        self.watch(app, "interval_s", self._show_status)
        self.watch(app, "advice_note", self._show_advice_note, init=False)
        self.watch(app, "final", self._show_final, init=False)
        self.query_one(ProcessTable).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "training":
            return self.training_pid is not None
        return not (action == "signal" and self.gputop.readonly)

    def _show_status(self) -> None:
        app = self.gputop
        self.query_one(StatusBar).show(app.snapshot, app.interval_s, app.paused, app.focus_pid)

    def _show_snapshot(self, snap: Snapshot | None) -> None:
        self._show_status()
        if snap is None:
            return
        app = self.gputop
        self.query_one(Banner).messages = self.banner_messages(snap)
        gpus = snap.gpus if app.focus_pid is None else focus_gpus(snap, app.focus_pid)
        if app.allocation is not None:
            gpus = tuple(job_gpus_first(gpus, job_gpu_indices(app.allocation, snap.gpus)))
        panel = self.query_one(GpuPanel)
        if panel.display != bool(gpus):
            panel.display = bool(gpus)
        if panel.cards_change(gpus):
            self._fit()  # the budget first: new cards are made in the layout they are shown in
        panel.show(gpus, app.history, snap.time, snap.processes)
        self.query_one(HostPanel).show(snap.host)
        self._show_processes()
        self._show_training()
        self._fit()

    def banner_messages(self, snap: Snapshot) -> tuple[str, ...]:
        """The banner's lines over ``snap``: the app's notices and what the snapshot calls for, after the job's end
        once it has ended. A screen built on this one may put lines of its own first (the multi-host view's, the
        state of a host that is not live) and call ``show_banner`` when they change between snapshots."""
        app = self.gputop
        notices = app.notices
        if app.allocation is not None:
            notices = (allocation_notice(app.allocation, job_gpu_indices(app.allocation, snap.gpus)), *notices)
        if app.final is None:
            return (*notices, *screen_messages(snap, app.focus_pid))
        # The job's end first; what its last snapshot said of it then is history.
        return (app.final.message, *notices, *screen_messages(snap, None))

    def show_banner(self) -> None:
        """Show ``banner_messages`` of the snapshot on screen again, and fit the panels to it where it changed."""
        snap = self.gputop.snapshot
        if snap is None:
            return
        messages = self.banner_messages(snap)
        banner = self.query_one(Banner)
        if banner.messages != messages:
            banner.messages = messages
            self._fit()

    def _show_training(self) -> None:
        """The training panel for ``training_target``, and the findings; both absent when there is nothing."""
        app = self.gputop
        snap = app.snapshot
        if snap is None:
            return
        selected = self.query_one(ProcessTable).selected
        view = training_target(snap, app.focus_pid, selected.pid if selected else None, self.training_pid)
        self.training_pid = None if view is None else view.pid
        detailed = app.focus_pid is not None and self.size.height >= DETAILED_TRAINING_MIN_HEIGHT
        final = app.final is not None
        shown = None if view is None else TrainingShown(view, snap.time, gpu_totals(snap), detailed, final=final)
        self.query_one(TrainingPanel).show(shown, app.history.processes.get(view.pid) if view else None)
        # The PID is worth its room only when a finding is about another process than the panel's.
        others = any(a.pid != self.training_pid for a in app.advice)
        limit = 5 if self.size.height >= DETAILED_TRAINING_MIN_HEIGHT else 3
        self.query_one(AdvicePanel).shown = AdviceShown(
            app.advice, show_pid=others, limit=limit, note=app.advice_note, final=final
        )

    def _show_final(self) -> None:
        self._show_snapshot(self.gputop.snapshot)

    def _show_advice_note(self) -> None:
        self._show_training()
        self._fit()

    def watch_training_pid(self, old: int | None, new: int | None) -> None:
        # Only when ``l`` comes or goes: the footer rebuilds its keys on every refresh of the bindings.
        if (old is None) != (new is None):
            self.refresh_bindings()

    def watch_options(self) -> None:
        self._show_processes()
        self._show_training()  # the rows moved under the cursor
        self._fit()

    def _show_processes(self) -> None:
        snap = self.gputop.snapshot
        if snap is None:
            return
        flat = None
        if not self.options.tree:
            if self._flat[0] is not snap:
                # Kept for the keys: a sort or a filter reorders these rows instead of making them again.
                self._flat = (snap, flat_rows(snap))
            flat = self._flat[1]
        rows = build_rows(snap, self.options, flat)
        table = self.query_one(ProcessTable)
        table.show(rows, any_mig(snap), any_container(snap), any_pod(snap))
        column = column_for(self.options.sort_key)
        table.sort = (column.key, column.descending != self.options.reverse)
        set_border_title(table, options_summary(self.options, len(rows)))  # holds the filter's text
        self._note(self._empty_table_note() if not rows else "")

    def _empty_table_note(self) -> str:
        options = self.options
        if options.filter_text or options.compute_only or options.mine_only:
            return "No process matches the filter and toggles in the title below."
        if options.focus_pid is not None:
            return f"No process left to show for PID {options.focus_pid}."
        return "No GPU processes."

    def _note(self, text: str) -> None:
        """Show (or hide, with "") the line above the table; untouched when unchanged, to spare a repaint."""
        note = self.query_one("#process-note", Static)
        if note.content != text:
            note.update(text)
            note.display = bool(text)

    def on_resize(self) -> None:
        self._show_training()
        self._fit()

    def _fit(self) -> None:
        """Give the GPU panel what the other parts leave, keeping the table usable."""
        height = self.size.height
        host = self.query_one(HostPanel)
        host.set_per_core(height >= PER_CORE_MIN_HEIGHT)
        banner = self.query_one(Banner)
        others = 1 + 1 + self.reserved_lines + (2 if height >= PER_CORE_MIN_HEIGHT else 1) + TABLE_MIN_LINES
        others += len(banner.messages) if banner.messages else 0
        width = self.size.width
        others += self.query_one(TrainingPanel).line_count(width) + self.query_one(AdvicePanel).line_count(width)
        self.query_one(GpuPanel).fit_to(height - others)

    @on(ProcessTable.RowSelected)
    def _open_detail(self, event: ProcessTable.RowSelected) -> None:
        from gputop.ui.screens.detail import ProcessDetailScreen

        self.app.push_screen(ProcessDetailScreen(event.row.pid))

    @on(ProcessTable.Highlighted)
    def _follow_cursor(self) -> None:
        self._show_training()
        self._fit()

    def action_training(self) -> None:
        from gputop.ui.screens.training import TrainingScreen

        if self.training_pid is not None:
            self.app.push_screen(TrainingScreen(self.training_pid))

    def action_job(self) -> None:
        # The job view, the job search and the signal dialog are imported when first used, not for the first frame.
        from gputop.jobs import find_jobs
        from gputop.ui.screens.job import JobScreen
        from gputop.ui.targets.job import job_target

        snap = self.gputop.snapshot
        selected = self.query_one(ProcessTable).selected
        pid = None if selected is None else selected.pid
        job = None if snap is None else job_target(find_jobs(snap), pid, self.gputop.focus_pid)
        if job is None:
            self.app.notify("No training job here: no process shows training evidence.", timeout=4)
        else:
            self.app.push_screen(JobScreen(job.id))

    @on(ProcessTable.HeaderSelected)
    def _sort_by_header(self, event: ProcessTable.HeaderSelected) -> None:
        key = event.column_key
        same = key == self.options.sort_key
        self.options = replace(self.options, sort_key=key, reverse=not self.options.reverse if same else False)

    def action_toggle_tree(self) -> None:
        self.options = replace(self.options, tree=not self.options.tree)

    def action_toggle_compute(self) -> None:
        self.options = replace(self.options, compute_only=not self.options.compute_only)

    def action_toggle_mine(self) -> None:
        self.options = replace(self.options, mine_only=not self.options.mine_only)

    def action_next_sort(self) -> None:
        self.action_sort_step(1)

    def action_sort_step(self, step: int) -> None:
        """Sort by the column ``step`` columns to the right (left, when negative) of the sorted one, among those on
        screen (MIG and CONTAINER while shown; a sorted column no longer shown counts as just outside the ends)."""
        keys = [c.key for c in self.query_one(ProcessTable).columns] or [c.key for c in COLUMNS]
        key = self.options.sort_key
        at = keys.index(key) if key in keys else (-1 if step > 0 else len(keys))
        self.action_sort_by(keys[(at + step) % len(keys)])

    def action_sort_by(self, key: str) -> None:
        self.options = replace(self.options, sort_key=key, reverse=False)

    def action_sort_menu(self) -> None:
        from gputop.ui.screens.sort import SortScreen

        def chosen(key: str | None) -> None:
            if key is not None:
                self.action_sort_by(key)

        self.app.push_screen(SortScreen(self.query_one(ProcessTable).columns, self.options.sort_key), chosen)

    def action_reverse_sort(self) -> None:
        self.options = replace(self.options, reverse=not self.options.reverse)

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.add_class("-shown")
        field.focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.remove_class("-shown")
        self.query_one(ProcessTable).focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.options = replace(self.options, filter_text=event.value.strip())

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.query_one("#filter", Input).remove_class("-shown")
        self.query_one(ProcessTable).focus()

    def action_signal(self) -> None:
        from gputop.ui.signals import confirm_and_signal

        row = self.query_one(ProcessTable).selected
        if row is not None and not self.gputop.readonly:
            confirm_and_signal(
                self.app, row.pid, row.start_time, row.user, row.command or row.name, visible=row.visible
            )
