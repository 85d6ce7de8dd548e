"""The multi-host view's screens: every host at once, and one host's full dashboard.

``HostsScreen`` shows a summary line per host and a section per host (GPUs and busiest processes, or why the host
is down). ``HostDashboardScreen`` is the single-host dashboard over the opened host's snapshots; Esc comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Input

from gputop.formatting import fmt_age, fmt_clock
from gputop.model import Snapshot
from gputop.remote.status import DOWN_STATES, LIVE, STALE
from gputop.ui.hosts.section import HostChosen, HostJobs, HostSection, HostShown, HostSummary
from gputop.ui.in_app import InGputopApp
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.text.hosts import PROCESS_ROWS, down_note
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.status_bar import StatusBar, StatusView

if TYPE_CHECKING:
    from gputop.ui.hosts.app import HostsView

TALL_PROCESS_ROWS = 5
TALL_MIN_HEIGHT = 60
TICK_S = 1.0
"""How often the ages and countdowns on screen move on."""


class HostsScreen(InGputopApp, Screen[None]):
    """All hosts. ↑/↓ select, ⏎ (or a click) opens the selected host's dashboard."""

    DEFAULT_CSS = """
    HostsScreen { layout: vertical; }
    HostsScreen > HostSummary { margin: 0 0 1 0; }
    HostsScreen > #host-sections { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False, key_display="↑", tooltip="Select the host above"),
        Binding("down", "move(1)", "Down", show=False, key_display="↓", tooltip="Select the host below"),
        Binding("home", "move(-1000)", show=False),
        Binding("end", "move(1000)", show=False),
        Binding(
            "enter",
            "open",
            "Open",
            key_display="⏎",
            tooltip="The selected host's full dashboard (or click it); Esc comes back",
        ),
    ]

    selected: var[int] = var(0)

    def __init__(self, view: HostsView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield StatusBar()
        yield HostSummary()
        yield HostJobs()
        with VerticalScroll(id="host-sections", can_focus=False):
            for index, name in enumerate(self.view.feeds):
                yield HostSection(index, name)
        yield Footer()

    def on_mount(self) -> None:
        self._show()
        self._unlisten = self.view.listen(self._show)
        self.watch(self.gputop, "paused", self._show)
        self.set_interval(TICK_S, self._tick)

    def on_unmount(self) -> None:
        self._unlisten()

    def _tick(self) -> None:
        if not self.gputop.paused:
            self._show()

    def on_resize(self) -> None:
        self._show()

    def _show(self) -> None:
        app = self.gputop
        now = self.view.clock()
        shown = self.view.hosts_shown()
        self._add_sections(len(shown))
        rows = TALL_PROCESS_ROWS if self.size.height >= TALL_MIN_HEIGHT else PROCESS_ROWS
        self.query_one(HostSummary).show(shown, now, self.selected)
        self.query_one(HostJobs).show(shown)
        for section, host in zip(self.query(HostSection), shown):
            section.show(host, now, section.index == self.selected, rows)
        words = hosts_count(shown, now)
        times = [host.snapshot.time for host in shown if host.snapshot is not None]
        clock = StatusView().clock if not times else fmt_clock(max(times))
        bar = self.query_one(StatusBar)
        bar.view = StatusView(hostname=words, clock=clock, interval_s=app.interval_s, paused=app.paused)

    def _add_sections(self, count: int) -> None:
        """A section for each host found since the screen was composed (a discovering source's)."""
        have = len(self.query(HostSection))
        if count > have:
            names = list(self.view.feeds)
            self.query_one("#host-sections", VerticalScroll).mount_all(
                HostSection(index, names[index]) for index in range(have, count)
            )
            self.call_after_refresh(self._show)

    def watch_selected(self, selected: int) -> None:
        if not self.is_mounted:
            return
        self._show()
        sections = list(self.query(HostSection))
        if 0 <= selected < len(sections):
            self.query_one("#host-sections", VerticalScroll).scroll_to_widget(sections[selected], animate=False)

    def action_move(self, step: int) -> None:
        count = len(self.view.feeds)
        self.selected = max(0, min(count - 1, self.selected + step))

    def action_open(self) -> None:
        self.view.open_host(list(self.view.feeds)[self.selected])

    @on(HostChosen)
    def _chosen(self, event: HostChosen) -> None:
        self.selected = event.index
        self.action_open()


def hosts_count(shown: Sequence[HostShown], now: float) -> str:
    """``3 hosts: 2 live, 1 down``: how many hosts are in each state, live first, then as they come."""
    counts: dict[str, int] = {LIVE: 0}
    for host in shown:
        state = host.status.shown_state(now)
        word = "down" if state in DOWN_STATES else state
        counts[word] = counts.get(word, 0) + 1
    parts = ", ".join(f"{count} {word}" for word, count in counts.items() if count or word == LIVE)
    return f"{len(shown)} host{'s' if len(shown) != 1 else ''}: {parts}"


class HostDashboardScreen(DashboardScreen):
    """The single-host dashboard over one host of the multi-host view; a banner says when that host is down."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape", "back", "Hosts", key_display="Esc", tooltip="Back to all hosts (first clears a filter, if any)"
        ),
    ]

    def __init__(self, view: HostsView, host_name: str) -> None:
        super().__init__()
        self.view = view
        self.host_name = host_name

    def on_mount(self) -> None:
        self._unlisten = self.view.listen(self.show_banner)
        self.set_interval(TICK_S, self.show_banner)

    def on_unmount(self) -> None:
        self._unlisten()

    def banner_messages(self, snap: Snapshot) -> tuple[str, ...]:
        """The host's state first while it is not live."""
        return (*self._host_note(), *super().banner_messages(snap))

    def _host_note(self) -> tuple[str, ...]:
        feed = self.view.feeds[self.host_name]
        now = self.view.clock()
        state = feed.status.shown_state(now)
        last = feed.status.last_snapshot_at
        age = "" if last is None else fmt_age(now - last)
        if state == STALE:
            return (f"{self.host_name} is stale: no update for {age}; showing its last snapshot",)
        if state != LIVE:
            shown = f"; showing its last snapshot, {age} old" if age else ""
            return (f"{self.host_name} is {state}: {down_note(feed.status, now)}{shown}",)
        return ()

    def action_back(self) -> None:
        field = self.query_one("#filter", Input)
        if field.has_class("-shown") or field.value:
            self.action_clear_filter()
        else:
            self.view.close_host()
