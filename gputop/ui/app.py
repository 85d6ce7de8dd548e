"""The dashboard application: takes snapshots from a source on another thread and shows the newest one.

Snapshots arrive on the source's thread. They are queued and the UI thread is woken once per batch, so a burst
(or a slow terminal) costs one redraw, while every snapshot still goes into the history behind the sparklines
and through the advisor, whose findings depend on every tick.
"""

from __future__ import annotations

import getpass
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import var

from gputop.advisor import Advisor, AdvisorConfig
from gputop.limits import MIN_INTERVAL_S
from gputop.model import Advice, Snapshot
from gputop.ui.history import History
from gputop.ui.inbox import Inbox
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.detail import ProcessDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.source import SnapshotSource
from gputop.ui.terminal import driver_class
from gputop.ui.widgets.process_table import ProcessTable

INTERVAL_STEPS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
MOVEMENT_KEYS = ("↑ ↓ PgUp PgDn Home End", "Move in the process table (a mouse click works too)")


def next_interval(interval_s: float, longer: bool) -> float:
    """The next step up or down from ``interval_s``; never below ``MIN_INTERVAL_S``."""
    if longer:
        return next((s for s in INTERVAL_STEPS_S if s > interval_s + 1e-9), max(interval_s, INTERVAL_STEPS_S[-1]))
    return max(MIN_INTERVAL_S, next((s for s in reversed(INTERVAL_STEPS_S) if s < interval_s - 1e-9), MIN_INTERVAL_S))


def key_help(readonly: bool) -> list[tuple[str, str]]:
    """``(keys, what they do)`` for every key, read from the bindings themselves so the help cannot fall behind."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for owner in (GputopApp, DashboardScreen, ProcessTable, ProcessDetailScreen, TrainingScreen):
        for binding in owner.BINDINGS:
            if not isinstance(binding, Binding) or not binding.tooltip or binding.action in seen:
                continue  # no tooltip: cursor keys, summed up in MOVEMENT_KEYS
            seen.add(binding.action)
            if not (readonly and binding.action == "signal"):
                rows.append((binding.key_display or binding.key, binding.tooltip))
        if owner is ProcessTable:
            rows.append(MOVEMENT_KEYS)
    return rows


class GputopApp(App[int]):
    """gputop's dashboard. ``source`` is the live ``Sampler`` or anything with its interface; ``advisor`` judges
    the training processes of each snapshot (tests give one with a short window)."""

    CSS_PATH = Path(__file__).with_name("gputop.tcss")
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit gputop"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="Quit gputop"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="List every key"),
        Binding("p", "toggle_pause", "Pause", tooltip="Freeze the display; sampling goes on, the graphs stay whole"),
        Binding("plus,equals_sign", "slower", "Slower", show=False, key_display="+", tooltip="Refresh less often"),
        Binding(
            "minus",
            "faster",
            "Faster",
            show=False,
            key_display="-",
            tooltip=f"Refresh more often (every {MIN_INTERVAL_S}s at most)",
        ),
    ]

    # ``var``, not ``reactive``: the screens redraw exactly what changed, the app itself never repaints.
    snapshot: var[Snapshot | None] = var(None)
    """The snapshot on screen: the newest one, unless paused."""
    advice: var[tuple[Advice, ...]] = var(tuple)
    """The advisor's findings as of ``snapshot``, most urgent first."""
    advice_note: var[str] = var("")
    """A line for the findings' panel while there are no findings to show yet (a replay computing them)."""
    paused = var(False)
    interval_s = var(1.0)

    class SnapshotsArrived(Message):
        """Wakes the UI thread: there are snapshots in the inbox."""

    def __init__(
        self,
        source: SnapshotSource,
        interval_s: float = 1.0,
        focus_pid: int | None = None,
        readonly: bool = False,
        user: str | None = None,
        advisor: Advisor | None = None,
        notice: str | None = None,
    ) -> None:
        super().__init__(driver_class=driver_class())
        self.source = source
        self.focus_pid = focus_pid
        self.readonly = readonly
        self.user = user if user is not None else getpass.getuser()
        self.history = History()
        # Pure and fed only snapshots, so it runs here on the UI thread: with a focus, that job; else every one.
        self.advisor = advisor if advisor is not None else Advisor(focus_pid)
        self.notices: tuple[str, ...] = (notice,) if notice else ()
        """Lines the banner shows above whatever the snapshot calls for (``gputop demo`` says what it runs)."""
        self.latest: Snapshot | None = None
        self._latest_advice: tuple[Advice, ...] = ()
        self._inbox: Inbox[Snapshot] = Inbox(lambda: self.post_message(self.SnapshotsArrived()))
        self.set_reactive(GputopApp.interval_s, interval_s)

    def dashboard_screen(self) -> DashboardScreen:
        """The main screen; a subclass may add to it (the replay's timeline)."""
        return DashboardScreen()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's notification, plain text unless asked: gputop's messages carry names from outside (a host,
        a recording's reason for a skipped row), and ``[/x]`` in one read as markup raises ``MarkupError``."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def on_mount(self) -> None:
        self.push_screen(self.dashboard_screen())
        self.source.subscribe(self._receive)
        self.source.start()

    def on_unmount(self) -> None:
        self.source.stop()

    def _receive(self, snap: Snapshot) -> None:
        """Runs on the source's thread: queue the snapshot and wake the UI thread if it is not already awake."""
        self._inbox.put(snap)

    def on_gputop_app_snapshots_arrived(self, _: SnapshotsArrived) -> None:
        latest = None
        for latest in self._inbox.drain():
            self.history.record(latest)
            try:
                self._latest_advice = self.advisor.update(latest)
            except Exception as exc:  # a fault in one rule must not take the dashboard down
                self.log.error(f"advisor failed: {exc!r}")
        if latest is not None:
            self.latest = latest
            if not self.paused:
                self._show(latest)

    def _show(self, snap: Snapshot) -> None:
        # The findings first: the screens redraw on ``snapshot`` and read both.
        self.advice = self._latest_advice
        self.snapshot = snap

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused and self.latest is not None:
            self._show(self.latest)

    def action_slower(self) -> None:
        self.interval_s = next_interval(self.interval_s, longer=True)

    def action_faster(self) -> None:
        self.interval_s = next_interval(self.interval_s, longer=False)

    def watch_interval_s(self, interval_s: float) -> None:
        self.source.set_interval(interval_s)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(key_help(self.readonly)))


def run_dashboard(
    interval_s: float,
    pid: int | None,
    readonly: bool,
    on_snapshot: Callable[[Snapshot], None] | None = None,
    advisor_config: AdvisorConfig | None = None,
    notice: str | None = None,
    close: threading.Event | None = None,
) -> int:
    """Run the live dashboard until the user quits; returns the exit status. ``on_snapshot`` also gets every
    snapshot, on the sampler's thread (``gputop run``'s recording and report). ``advisor_config`` sets the
    advisor's window (default 20 s); ``notice`` is a line for the banner. Setting ``close``, from any thread,
    closes the dashboard as ``q`` does (``gputop run`` when its terminal hangs up)."""
    from gputop.collect.sampler import Sampler, SnapshotMaker

    source = Sampler(interval_s, maker_factory=lambda: SnapshotMaker(focus_pid=pid))
    if on_snapshot is not None:
        source.subscribe(on_snapshot)
    advisor = Advisor(pid, advisor_config)
    app = GputopApp(source, interval_s=interval_s, focus_pid=pid, readonly=readonly, advisor=advisor, notice=notice)
    ended = threading.Event()
    if close is not None:

        def close_when_set() -> None:
            close.wait()
            while not ended.is_set():
                try:
                    app.call_from_thread(app.exit)
                    return
                except RuntimeError:  # not running yet (set while it starts): try again shortly
                    ended.wait(0.1)

        threading.Thread(target=close_when_set, name="gputop-close", daemon=True).start()
    try:
        app.run()
    finally:
        ended.set()
        source.stop()
    return app.return_code or 0
