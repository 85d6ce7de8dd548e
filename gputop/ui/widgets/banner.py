"""A strip of messages that must not be missed: no driver, a focus process without a GPU, collector notices."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from gputop.model import PROCESS_EXITED, Snapshot
from gputop.ui.process_rows import focus_family


def screen_messages(snap: Snapshot, focus_pid: int | None) -> tuple[str, ...]:
    """What the banner must say about this snapshot: no driver, the focus process's state, collector notices."""
    messages = []
    if not snap.driver.ok:
        messages.append(f"No GPU information: {snap.driver.reason or 'the NVIDIA driver did not answer'}")
    if focus_pid is not None:
        focus = snap.host_process(focus_pid)
        family = focus_family(snap, focus_pid)
        if focus is None or focus.unavailable.get("status") == PROCESS_EXITED:
            messages.append(f"PID {focus_pid} has exited.")
        elif snap.driver.ok and not any(p.pid in family for p in snap.processes):
            who = f" ({focus.name})" if focus.name else ""
            messages.append(f"PID {focus_pid}{who} uses no GPU: showing its CPU side and its children.")
    messages.extend(snap.notices)
    return tuple(messages)


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
