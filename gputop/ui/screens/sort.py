"""The sort menu (``F6``, as in htop): the process table's columns in a list, the sorted one under the cursor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gputop.ui.process_rows import Column


class SortScreen(ModalScreen[str | None]):
    """Returns the key of the column chosen with ⏎ (or a click), None when cancelled."""

    DEFAULT_CSS = """
    SortScreen { align: center middle; }
    SortScreen > OptionList {
        width: 34;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: round $accent;
        background: $surface;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f6", "cancel", "Cancel")]

    def __init__(self, columns: Sequence[Column], sorted_key: str) -> None:
        super().__init__()
        self.columns = tuple(columns)
        self.sorted_key = sorted_key

    def compose(self) -> ComposeResult:
        options = OptionList(
            *(Option(c.title + ("  (largest first)" if c.descending else ""), id=c.key) for c in self.columns)
        )
        options.border_title = "Sort by"
        options.border_subtitle = "⏎ sort · Esc cancel"
        yield options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [c.key for c in self.columns]
        options.highlighted = keys.index(self.sorted_key) if self.sorted_key in keys else 0
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
