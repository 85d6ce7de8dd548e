"""A strip of messages that must not be missed: no driver, a focus process without a GPU, collector notices."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static


class Banner(Static):
    """Hidden while it has nothing to say; one line per message otherwise."""

    DEFAULT_CSS = """
    Banner {
        height: auto;
        padding: 0 1;
        background: $warning 15%;
        border-left: thick $warning;
        color: $text;
        display: none;
    }
    Banner.-shown { display: block; }
    """

    messages: reactive[tuple[str, ...]] = reactive(tuple)

    def watch_messages(self, messages: tuple[str, ...]) -> None:
        self.update(Text("\n".join(messages)))
        self.set_class(bool(messages), "-shown")
