"""The dialog that asks before a signal is sent, naming the process it will hit."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputop.formatting import NA

WHAT_EACH_DOES = (
    "SIGINT is Ctrl+C: a training loop can catch it and stop cleanly.  SIGTERM asks the process to exit.  "
    "SIGKILL ends it at once: nothing is saved, and its DataLoader workers are left to exit on their own."
)


class SignalDialog(ModalScreen[signal.Signals | None]):
    """Returns the chosen signal, or None when cancelled. Cancel has the focus, so Enter alone sends nothing.

    ``signals`` are the ones it may return, by name (``gputop.ui.signals.SIGNALS``, handed in by the caller that
    sends them): its keys and buttons name SIGINT, SIGTERM and SIGKILL, and a name not among them returns None."""

    DEFAULT_CSS = """
    SignalDialog { align: center middle; }
    SignalDialog > Vertical {
        width: 76;
        max-width: 100%;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    SignalDialog #target { margin-bottom: 1; }
    SignalDialog #help { color: $text-muted; margin-bottom: 1; }
    SignalDialog Horizontal { height: auto; }
    SignalDialog Button { margin-right: 1; min-width: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Cancel"),
        Binding("i", "send('SIGINT')", "SIGINT"),
        Binding("t", "send('SIGTERM')", "SIGTERM"),
        Binding("K", "send('SIGKILL')", "SIGKILL"),
    ]

    def __init__(
        self, pid: int, user: str | None, command: str | None, signals: Sequence[tuple[str, signal.Signals]]
    ) -> None:
        super().__init__()
        self.pid = pid
        self.user = user
        self.command = command
        self.signals = dict(signals)

    def compose(self) -> ComposeResult:
        with Vertical():
            target = Text.assemble(
                ("Send a signal to PID ", "bold"), (str(self.pid), "bold"), f"  user {self.user or NA}\n"
            )
            target.append(self.command or NA)
            yield Static(target, id="target")
            yield Static(WHAT_EACH_DOES, id="help")
            with Horizontal():
                yield Button("SIGINT (i)", id="SIGINT", variant="warning")
                yield Button("SIGTERM (t)", id="SIGTERM", variant="warning")
                yield Button("SIGKILL (K)", id="SIGKILL", variant="error")
                yield Button("Cancel (Esc)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.action_send(event.button.id or "")

    def action_send(self, name: str) -> None:
        self.dismiss(self.signals.get(name))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
