"""The multi-host view's widgets: the summary (a line per host) and a bordered section per host.

Both draw their lines with ``hosts_text`` and repaint only when what they show changes: a host's new snapshot,
its state, the selection, or (for the ages on screen) the second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget

from gputop.jobs import Job
from gputop.model import Snapshot
from gputop.remote.prometheus.readings import fleet_findings
from gputop.remote.status import LIVE, STALE, HostStatus
from gputop.ui.history import History
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import (
    PROCESS_ROWS,
    job_lines,
    jobs_across,
    section_lines,
    summary_header,
    summary_layout,
    summary_line,
)
from gputop.ui.widgets.drawing import TextLines
from gputop.ui.widgets.titles import set_border_subtitle, set_border_title

PALETTE_CSS = """
    {name} > .host--label {{ color: $text-muted; }}
    {name} > .host--fill {{ color: $success; }}
    {name} > .host--warn {{ color: $warning; }}
    {name} > .host--crit {{ color: $error; text-style: bold; }}
    {name} > .host--track {{ color: $foreground 25%; }}
    {name} > .host--dim {{ color: $text-disabled; }}
    {name} > .host--spark {{ color: $accent; }}
"""
PALETTE_PARTS = ("label", "fill", "warn", "crit", "track", "dim", "spark")


@dataclass(frozen=True)
class HostShown:
    """One host as the view draws it. ``snapshot`` is compared by identity: a new one is a new reading."""

    name: str
    status: HostStatus
    snapshot: Snapshot | None
    history: History | None = None

    def key(self, now: float) -> tuple[object, ...]:
        """Equal keys draw equal lines. The second counts only where an age or a countdown is on screen."""
        shown = self.status.shown_state(now)
        ticking = shown not in (LIVE,) or self.snapshot is None
        return (self.name, self.status, id(self.snapshot), shown, int(now) if ticking else None)


class HostChosen(Message):
    """A host was clicked: the screen selects it and opens its dashboard."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class _HostLines(TextLines, Widget):
    """Shared by both widgets: the palette from the component classes."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"host--{part}" for part in PALETTE_PARTS}

    def palette(self) -> Palette:
        return Palette(*(self.component_style(f"host--{part}") for part in PALETTE_PARTS))


class HostSummary(_HostLines):
    """A header and one line per host, the selected one marked ``▶``."""

    DEFAULT_CSS = """
    HostSummary { height: auto; padding: 0 1; }
    """ + PALETTE_CSS.format(name="HostSummary")

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._hosts: tuple[HostShown, ...] = ()
        self._now = 0.0
        self._selected = 0
        self._key: object = None

    def show(self, hosts: Sequence[HostShown], now: float, selected: int) -> None:
        key = (tuple(h.key(now) for h in hosts), int(now), selected)
        layout = len(hosts) != len(self._hosts)
        self._hosts, self._now, self._selected = tuple(hosts), now, selected
        if key != self._key:
            self._key = key
            self.refresh(layout=layout)

    def text_key(self) -> object:
        return self._key

    def text_lines(self, width: int) -> list[Text]:
        p = self.palette()
        layout = summary_layout([h.name for h in self._hosts], width)
        lines = [summary_header(layout, width, p)]
        for index, host in enumerate(self._hosts):
            selected = index == self._selected
            lines.append(summary_line(host.name, host.status, host.snapshot, self._now, layout, width, p, selected))
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + len(self._hosts)

    def on_click(self, event: events.Click) -> None:
        index = event.y - 1  # the header is line 0
        if 0 <= index < len(self._hosts):
            self.post_message(HostChosen(index))


class HostJobs(_HostLines):
    """The jobs of several ranks across the hosts, a line each (``text.hosts.job_lines``); hidden without any."""

    DEFAULT_CSS = """
    HostJobs { height: auto; padding: 0 1; margin: 0 0 1 0; }
    """ + PALETTE_CSS.format(name="HostJobs")

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self._jobs: tuple[Job, ...] = ()
        self._findings: dict[str, tuple[str, ...]] = {}
        self._key: object = None

    def show(self, hosts: Sequence[HostShown]) -> None:
        key = tuple(id(h.snapshot) for h in hosts)
        if key == self._key:
            return
        self._key = key
        jobs = jobs_across([(h.name, h.snapshot) for h in hosts])
        layout = len(jobs) != len(self._jobs)
        self._jobs = jobs
        self._findings = {h.name: fleet_findings(h.snapshot) for h in hosts if h.snapshot is not None}
        self.display = bool(jobs)
        self.refresh(layout=layout)

    @property
    def jobs(self) -> tuple[Job, ...]:
        return self._jobs

    def text_key(self) -> object:
        return self._key

    def text_lines(self, width: int) -> list[Text]:
        return job_lines(self._jobs, width, self.palette(), self._findings)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._jobs)


class HostSection(_HostLines):
    """One host: its machine, GPUs (a line each) and busiest processes, or why it has none to show."""

    DEFAULT_CSS = """
    HostSection {
        height: auto;
        padding: 0 1;
        border: round $foreground 30%;
        border-title-color: $text;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
    }
    HostSection.-selected { border: heavy $accent; }
    HostSection.-stale { border-title-color: $warning; }
    HostSection.-down { border: round $error 70%; border-title-color: $error; }
    HostSection.-down.-selected { border: heavy $error; }
    """ + PALETTE_CSS.format(name="HostSection")

    def __init__(self, index: int, name: str) -> None:
        super().__init__(id=f"host-{index}")
        self.index = index
        self.host_name = name
        self._shown: HostShown | None = None
        self._now = 0.0
        self._rows = PROCESS_ROWS
        self._key: object = None
        self._count = 0

    def show(self, shown: HostShown, now: float, selected: bool, process_rows: int = PROCESS_ROWS) -> None:
        self._shown, self._now, self._rows = shown, now, process_rows
        state = shown.status.shown_state(now)
        set_border_title(self, f" {shown.name} · {state} ")
        set_border_subtitle(self, " ⏎ open " if selected and shown.snapshot is not None else "")
        self.set_class(selected, "-selected")
        self.set_class(state == STALE, "-stale")
        self.set_class(state not in (LIVE, STALE), "-down")
        key = (shown.key(now), process_rows)
        if key != self._key:
            self._key = key
            count = len(self.text_lines(max(1, self.content_size.width)))
            self.refresh(layout=count != self._count)
            self._count = count

    def text_key(self) -> object:
        return self._key

    def text_lines(self, width: int) -> list[Text]:
        shown = self._shown
        if shown is None:
            return []
        return section_lines(shown.status, shown.snapshot, shown.history, self._now, width, self.palette(), self._rows)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self.text_lines(width)))

    def on_click(self) -> None:
        self.post_message(HostChosen(self.index))
