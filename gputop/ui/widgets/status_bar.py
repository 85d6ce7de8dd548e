"""The top line: which machine and driver, the time of the reading shown, the refresh interval, and "PAUSED"."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gputop.formatting import NA, fmt_clock
from gputop.frozen import immutable
from gputop.model import Snapshot
from gputop.ui.history import HISTORY_S
from gputop.ui.widgets.drawing import TextLines


@immutable
class StatusView:
    hostname: str = ""
    driver: str = ""
    clock: str = "--:--:--"
    interval_s: float = 1.0
    paused: bool = False
    focus_pid: int | None = None
    label: str = ""
    """Shown instead of the refresh interval: ``REPLAY run.gputop`` in a replay."""


def driver_text(snap: Snapshot) -> str:
    """``driver 550.54.15  CUDA 12.4``, or why there is no driver."""
    if not snap.driver.ok:
        return "no NVIDIA driver"
    return f"driver {snap.driver.driver_version or NA}  CUDA {snap.driver.cuda_version or NA}"


class StatusBar(TextLines, Widget):
    """Shows the reading's own time (not the wall clock), so a paused screen says how old it is."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    StatusBar > .status-bar--name { text-style: bold; color: $accent; }
    StatusBar > .status-bar--muted { color: $text-muted; }
    StatusBar > .status-bar--paused { text-style: bold reverse; color: $warning; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"status-bar--name", "status-bar--muted", "status-bar--paused"}

    view: reactive[StatusView] = reactive(StatusView)

    def show(self, snap: Snapshot | None, interval_s: float, paused: bool, focus_pid: int | None) -> None:
        label = getattr(self.app, "status_label", "")  # a replay's app names its file; a live one has none
        if snap is None:
            self.view = StatusView(interval_s=interval_s, paused=paused, focus_pid=focus_pid, label=label)
            return
        self.view = StatusView(
            hostname=snap.host.hostname,
            driver=driver_text(snap),
            clock=fmt_clock(snap.time),
            interval_s=interval_s,
            paused=paused,
            focus_pid=focus_pid,
            label=label,
        )

    def text_key(self) -> object:
        return self.view

    def text_lines(self, width: int) -> list[Text]:
        view = self.view
        name, muted, paused = (self.component_style(f"status-bar--{n}") for n in ("name", "muted", "paused"))
        focus = f"focus PID {view.focus_pid}" if view.focus_pid else ""
        badge: list[str | tuple[str, Style]] = [(" PAUSED ", paused), "  "] if view.paused else []
        interval = (f"{view.label}  ", name) if view.label else (f"every {view.interval_s:g}s  ", muted)
        graphs = (f"graphs {HISTORY_S / 60:g} min  ", muted)
        # What gives way first: the graphs' span, the interval (a replay's label stays), then the driver (the
        # process followed matters more at a glance); only then is the left cut.
        full = (view.hostname, view.driver, focus)
        short = (view.hostname, focus) if focus else full
        tries = [(full, (interval, graphs)), (full, (interval,)), (short, (interval,))]
        if not view.label:
            tries.append((short, ()))
        for shown, parts in tries:
            left = Text("gputop", style=name)
            for part in shown:
                if part:
                    left.append("  │  ", style=muted)
                    left.append(part)
            right = Text.assemble(*badge, *parts, view.clock)
            if left.cell_len + right.cell_len + 2 <= width:
                break
        else:
            left.truncate(max(0, width - right.cell_len - 2), overflow="ellipsis")
        left.pad_right(width - left.cell_len - right.cell_len)
        left.append_text(right)
        return [left]
