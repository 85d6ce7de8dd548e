"""The process table: a Line API widget that repaints only the rows whose cells changed.

Rows are kept by key (GPU and PID), so on every tick a row's cells are compared with what is on screen and only
changed lines are redrawn: the cursor stays on its process and the scroll position stays put. A ``DataTable``
re-renders every visible cell when any one changes, which at one tick a second was most of gputop's CPU time.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop.ui.process_rows import (
    COLUMNS,
    CONTAINER_COLUMN,
    MIG_COLUMN,
    NARROW_POD_COLUMN,
    POD_COLUMN,
    WIDE_TABLE_MIN,
    Column,
    ProcessRow,
)
from gputop.ui.text.process_cells import Cell, fit_parts, row_cells
from gputop.ui.widgets.drawing import CachedComponentStyles

CELL_PADDING = 1
SCROLLBAR_CELLS = 1
ROLES = ("dim", "tree", "worker")


class ProcessTable(CachedComponentStyles, ScrollView, can_focus=True):
    """Shows ``ProcessRow``s under a fixed header; Enter or a click on the cursor row asks for details."""

    DEFAULT_CSS = """
    ProcessTable {
        height: 1fr;
        min-height: 4;
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
        border-top: solid $foreground 30%;
        border-title-color: $text;
        border-title-align: left;
    }
    ProcessTable:focus { border-top: solid $accent; }
    ProcessTable > .process-table--header { background: $panel; text-style: bold; }
    ProcessTable > .process-table--cursor { background: $block-cursor-blurred-background; }
    ProcessTable:focus > .process-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    ProcessTable:nocolor > .process-table--cursor { text-style: reverse; }
    ProcessTable > .process-table--dim { color: $text-disabled; }
    ProcessTable > .process-table--tree { color: $text-muted; }
    ProcessTable > .process-table--worker { color: $text-secondary; text-style: italic; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "process-table--header",
        "process-table--cursor",
        *(f"process-table--{role}" for role in ROLES),
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Details", key_display="⏎", tooltip="Details of the selected process"),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1000000)", "First", show=False),
        Binding("end", "move(1000000)", "Last", show=False),
    ]

    sort: var[tuple[str, bool]] = var(("gpu", False))
    """The sorted column and whether it runs largest first, marked in the header."""

    class RowSelected(Message):
        """The user asked for the details of ``row``."""

        def __init__(self, row: ProcessRow) -> None:
            super().__init__()
            self.row = row

    class Highlighted(Message):
        """The user moved the cursor onto ``row`` (a key or a click)."""

        def __init__(self, row: ProcessRow) -> None:
            super().__init__()
            self.row = row

    class HeaderSelected(Message):
        """The user clicked the title of column ``column_key``."""

        def __init__(self, column_key: str) -> None:
            super().__init__()
            self.column_key = column_key

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._columns: tuple[Column, ...] = ()
        self._rows: list[ProcessRow] = []
        self._cells: list[tuple[Cell, ...] | None] = []
        """Each row's cells, worked out when the row is first drawn or compared (None until then): with 2,000
        rows only the few on screen are ever turned into text."""
        self._cursor = 0
        self._width_cache: tuple[object, list[int]] = (None, [])
        self._columns_for: tuple[bool, bool, bool, bool] | None = None
        """What ``_columns`` were chosen for: a wide table, MIG, containers, pods."""
        self._mig = False
        self._containers = False
        self._pods = False

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def columns(self) -> tuple[Column, ...]:
        """The columns drawn now, left to right."""
        return self._columns

    @property
    def selected(self) -> ProcessRow | None:
        """The row under the cursor."""
        return self._rows[self._cursor] if self._rows else None

    def cells_at(self, index: int) -> list[str]:
        """The plain text of each cell of row ``index``, as drawn (tests read the table through it)."""
        return ["".join(text for text, _ in cell) for cell in self._cells_of(index)]

    def _cells_of(self, index: int) -> tuple[Cell, ...]:
        cells = self._cells[index]
        if cells is None:
            cells = self._cells[index] = row_cells(self._rows[index], self._columns)
        return cells

    def _visible_rows(self) -> range:
        """The indexes of the rows on screen (the header takes the first line)."""
        top = round(self.scroll_y)
        return range(top, top + max(0, self.inner_size.height - 1))

    def show(self, rows: list[ProcessRow], mig: bool = False, containers: bool = False, pods: bool = False) -> None:
        """Show ``rows`` in this order; only lines whose content changed are repainted. ``mig`` adds the MIG
        column (some GPU is in MIG mode), ``containers`` the CONTAINER column in a wide table (some process runs
        in a container or a batch job), ``pods`` the pod's names (some process's pod is known by name): all three
        in a wide table, the pod's name in place of the user in a narrow one."""
        selected = self.selected
        self._mig, self._containers, self._pods = mig, containers, pods
        if self._ensure_columns():
            self.refresh()
        old_rows, old_cells = self._rows, self._cells
        self._rows = rows
        self._cells = [None] * len(rows)
        if selected is not None:
            at = self._cursor
            if not (at < len(rows) and rows[at].key == selected.key):
                at = next((i for i, row in enumerate(rows) if row.key == selected.key), at)
            self._cursor = at
        self._cursor = max(0, min(self._cursor, len(rows) - 1))
        if len(rows) != len(old_rows):
            self.virtual_size = Size(self.inner_size.width, len(rows) + 1)
        # Rows off screen are neither compared nor drawn: their cells wait until they scroll into view.
        for index in self._visible_rows():
            if index >= len(rows) and index >= len(old_rows):
                break
            was = old_cells[index] if index < len(old_rows) else None
            if was is None or index >= len(rows) or rows[index].key != old_rows[index].key:
                self._refresh_row(index)
            else:
                now = self._cells_of(index)
                if now != was:
                    self._refresh_cells(index, was, now)

    def _refresh_row(self, index: int) -> None:
        y = index + 1 - round(self.scroll_y)
        if 1 <= y < self.inner_size.height:
            self.refresh(Region(0, y, self.inner_size.width, 1))

    def _refresh_cells(self, index: int, before: tuple[Cell, ...], after: tuple[Cell, ...]) -> None:
        """Repaint just the cells that changed: over ssh a tick then costs a few bytes per changed number."""
        y = index + 1 - round(self.scroll_y)
        if not 1 <= y < self.inner_size.height:
            return
        x = 0
        for was, now, cell_width in zip(before, after, self._widths()):
            span = cell_width + 2 * CELL_PADDING
            if was != now:
                self.refresh(Region(x, y, span, 1))
            x += span

    def watch_sort(self) -> None:
        self.refresh(Region(0, 0, self.inner_size.width, 1))

    def on_resize(self) -> None:
        self._ensure_columns()
        self.virtual_size = Size(self.inner_size.width, len(self._rows) + 1)
        self.refresh()

    def _ensure_columns(self) -> bool:
        """The narrow column set below ``WIDE_TABLE_MIN`` cells, so the command keeps some room at 80 columns.
        Whether the columns changed (the caller repaints)."""
        wide = self.inner_size.width >= WIDE_TABLE_MIN
        key = (wide, self._mig, self._containers, self._pods)
        if key == self._columns_for:
            return False
        self._columns_for = key
        columns = tuple(c for c in COLUMNS if wide or not c.wide_only)
        if self._mig:
            columns = (columns[0], MIG_COLUMN, *columns[1:])
        if self._pods and not wide:
            columns = tuple(NARROW_POD_COLUMN if c.key == "user" else c for c in columns)
        elif self._containers and wide:
            columns = (*columns[:-1], POD_COLUMN if self._pods else CONTAINER_COLUMN, columns[-1])
        if columns == self._columns:
            return False
        self._columns = columns
        self._cells = [None] * len(self._rows)
        return True

    def _widths(self) -> list[int]:
        """Each column's width; the command column takes what the others leave."""
        key = (self.inner_size.width, self._columns)
        if self._width_cache[0] != key:
            fixed = sum(c.width + 2 * CELL_PADDING for c in self._columns if c.width)
            command = max(10, self.inner_size.width - fixed - 2 * CELL_PADDING - SCROLLBAR_CELLS)
            self._width_cache = (key, [c.width or command for c in self._columns])
        return self._width_cache[1]

    # -- drawing ---------------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        # The columns for the width drawn at: rows shown before the first layout (0 wide) chose the narrow set,
        # and the resize that chooses again comes a frame later. No repaint to ask for: a new width draws the
        # whole table.
        self._ensure_columns()
        width = self.inner_size.width
        base = self.base_style()
        if y == 0:
            return self._header(base, width)
        index = round(self.scroll_y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width, base)
        style = base + self._style("cursor") if index == self._cursor else base
        segments = []
        for column, cell, cell_width in zip(self._columns, self._cells_of(index), self._widths()):
            segments.append(Segment(" " * CELL_PADDING, style))
            for text, role in fit_parts(cell, cell_width, column.right):
                segments.append(Segment(text, style + self._style(role) if role else style))
            segments.append(Segment(" " * CELL_PADDING, style))
        # Joined runs of one style: fewer escape sequences per line on the wire.
        return Strip(segments).adjust_cell_length(width, style).simplify()

    def _header(self, base: Style, width: int) -> Strip:
        sort_key, descending = self.sort
        line = ""
        for column, cell_width in zip(self._columns, self._widths()):
            title = column.title + (("▼" if descending else "▲") if column.key == sort_key else "")
            # A title with its sort arrow may run into the cell's right padding.
            body = title.rjust(cell_width) if column.right and len(title) <= cell_width else title
            line += (" " * CELL_PADDING + body[: cell_width + CELL_PADDING]).ljust(cell_width + 2 * CELL_PADDING)
        style = base + self._style("header")
        return Strip([Segment(line, style)]).adjust_cell_length(width, style)

    def _style(self, part: str) -> Style:
        return self.component_style(f"process-table--{part}", partial=part in ROLES)

    # -- keys and mouse --------------------------------------------------------------------------------------

    def _move_to(self, index: int) -> None:
        if not self._rows:
            return
        index = max(0, min(index, len(self._rows) - 1))
        if index != self._cursor:
            self._refresh_row(self._cursor)
            self._cursor = index
            self._refresh_row(index)
            self.post_message(self.Highlighted(self._rows[index]))
        visible = max(1, self.inner_size.height - 1)
        top = round(self.scroll_y)
        if index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + visible:
            self.scroll_to(y=index - visible + 1, animate=False, immediate=True)

    def action_move(self, rows: int) -> None:
        self._move_to(self._cursor + rows)

    def action_page(self, pages: int) -> None:
        self._move_to(self._cursor + pages * max(1, self.inner_size.height - 2))

    def action_select(self) -> None:
        if self.selected is not None:
            self.post_message(self.RowSelected(self.selected))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            right = 0
            for column, cell_width in zip(self._columns, self._widths()):
                right += cell_width + 2 * CELL_PADDING
                if offset.x < right:
                    self.post_message(self.HeaderSelected(column.key))
                    return
            return
        index = round(self.scroll_y) + offset.y - 1
        if index >= len(self._rows):
            return
        if index == self._cursor:
            self.action_select()
        else:
            self._move_to(index)
