"""``g`` in a replay: the line to type a time to jump to."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input

from gputop.ui.replay.time import JUMP_FORMS
from gputop.ui.widgets.process_table import ProcessTable


class JumpInput(Input):
    """``g``: a time to jump to. A bad entry is said in the input itself, in one line."""

    DEFAULT_CSS = """
    JumpInput, JumpInput:focus { dock: bottom; display: none; border: none; height: 1; padding: 0 1; }
    JumpInput.-shown { display: block; }
    JumpInput.-error > .input--placeholder { color: $text-error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Cancel", show=False)]
    PROMPT = f"jump to: {JUMP_FORMS}  (⏎ go, Esc cancel)"

    def __init__(self) -> None:
        super().__init__(placeholder=self.PROMPT, id="jump")

    def open(self) -> None:
        self.value = ""
        self._say(self.PROMPT)
        self.remove_class("-error")
        self.add_class("-shown")
        self.focus()

    def show_error(self, message: str) -> None:
        self.value = ""
        self._say(message)
        self.add_class("-error")

    def _say(self, text: str) -> None:
        """Show ``text`` in place of an entry, cut to one line (a longer placeholder would wrap)."""
        width = self.screen.size.width - 3  # the padding, and the cursor after the text
        self.placeholder = text if len(text) <= width else text[: max(0, width - 1)] + "…"

    def action_close(self) -> None:
        self.remove_class("-shown", "-error")
        self.screen.query_one(ProcessTable).focus()
