"""The dashboard application: shows the newest snapshot of a ``Feed`` (gputop/ui/feed/).

One app serves the live dashboard, the replay and the multi-host view: the feed says what to show, and a
``Mode`` brings what surrounds it (the first screen, what ``p`` does, the key help). The app knows nothing of
where snapshots come from: the command that opens it makes the feed.
"""

from __future__ import annotations

import getpass
import threading
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.screen import Screen

from gputop import startup
from gputop.collect.slurm_allocation import Allocation
from gputop.limits import MIN_INTERVAL_S
from gputop.model import Advice, Snapshot
from gputop.ui.feed import Ended, Feed
from gputop.ui.history import History
from gputop.ui.keys import HelpGroup, HelpRow, bound_keys, key_help, unbound_words
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.terminal import driver_class
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.process_table import ProcessTable

INTERVAL_STEPS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
MOVEMENT_KEYS = HelpRow("↑ ↓ PgUp PgDn Home End", "Move in the process table (a mouse click works too)")
GPU_PANEL_KEYS = HelpRow(
    "Tab", "To the GPU panel and back, when the GPUs do not all fit: there ↑ ↓ PgUp PgDn Home End scroll it"
)


def next_interval(interval_s: float, longer: bool) -> float:
    """The next step up or down from ``interval_s``; never below ``MIN_INTERVAL_S``."""
    if longer:
        return next((s for s in INTERVAL_STEPS_S if s > interval_s + 1e-9), max(interval_s, INTERVAL_STEPS_S[-1]))
    return max(MIN_INTERVAL_S, next((s for s in reversed(INTERVAL_STEPS_S) if s < interval_s - 1e-9), MIN_INTERVAL_S))


class Mode:
    """What surrounds the dashboard of a feed: its first screen, what ``p`` does and the keys the help lists, with
    the rest of the app's life where a mode needs it. ``LiveMode`` is the live dashboard's; the replay's and the
    multi-host view's are in gputop/ui/replay and gputop/ui/hosts. A mode's own app-wide keys are declared as the
    ``BINDINGS`` of its app's class (``ReplayApp``), whose actions name the mode's own as ``mode('name', args...)``.
    """

    app: GputopApp

    def attach(self, app: GputopApp) -> None:
        """Called once, as ``app`` is made."""
        self.app = app

    def main_screen(self) -> Screen[None]:
        """The screen the app opens on."""
        raise NotImplementedError

    def mounted(self) -> None:
        """The app is mounted and its feed started: nothing to do unless a mode says."""

    def toggle_pause(self) -> None:
        """``p``: freeze the display while the feed goes on; the newest snapshot is shown again on resuming."""
        app = self.app
        app.paused = not app.paused
        if not app.paused and app.feed.latest is not None:
            app.show()

    def help_groups(self) -> list[HelpGroup]:
        """The bindings the key help lists now, in order."""
        raise NotImplementedError


def dashboard_help_groups(app_bindings: HelpGroup = ()) -> list[HelpGroup]:
    """The dashboard's keys for the help: the app's (``GputopApp.BINDINGS`` unless given), the overview's, the
    process table's, a process's detail, the job screen and the training screen."""
    # The other screens are imported when first needed: the first frame shows the dashboard alone.
    from gputop.ui.screens.detail import ProcessDetailScreen
    from gputop.ui.screens.job import JobScreen
    from gputop.ui.screens.training import TrainingScreen

    return [
        app_bindings or GputopApp.BINDINGS,
        DashboardScreen.BINDINGS,
        [*ProcessTable.BINDINGS, MOVEMENT_KEYS, GPU_PANEL_KEYS],
        ProcessDetailScreen.BINDINGS,
        JobScreen.BINDINGS,
        TrainingScreen.BINDINGS,
    ]


class LiveMode(Mode):
    """The live dashboard: ``p`` freezes the display while the feed goes on."""

    def main_screen(self) -> Screen[None]:
        return DashboardScreen()

    def help_groups(self) -> list[HelpGroup]:
        return dashboard_help_groups()


class GputopApp(App[int]):
    """gputop's dashboard over a ``Feed``: the live one (``LiveFeed``), a replay or a host of the multi-host
    view. ``mode`` brings what else the feed needs around the dashboard (``LiveMode`` when not given)."""

    CSS_PATH = Path(__file__).with_name("gputop.tcss")
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit gputop (F10 too)"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="Quit gputop"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="List every key (F1 too)"),
        Binding("f10", "quit", "Quit", show=False),  # htop's quit and help keys
        Binding("f1", "help", "Help", show=False),
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
    final: var[Ended | None] = var(None)
    """Set once the job the feed watched has ended: the screens hold its last view, marked final."""

    class SnapshotsArrived(Message):
        """Wakes the UI thread: the feed has snapshots waiting."""

    def __init__(
        self,
        feed: Feed,
        mode: Mode | None = None,
        *,
        interval_s: float = 1.0,
        focus_pid: int | None = None,
        readonly: bool = False,
        user: str | None = None,
        notice: str | None = None,
        job_id: str | None = None,
        allocation: Allocation | None = None,
    ) -> None:
        super().__init__(driver_class=driver_class())
        self.feed = feed
        self.mode: Mode = mode if mode is not None else LiveMode()
        self.focus_pid = focus_pid
        self.readonly_everywhere = readonly
        self.user = user if user is not None else getpass.getuser()
        self.notices: tuple[str, ...] = (notice,) if notice else ()
        """Lines the banner shows above whatever the snapshot calls for (``gputop demo`` says what it runs)."""
        self.job_id = job_id
        """The job whose view opens on top of the first screen (``--job``)."""
        self.allocation = allocation
        """The Slurm job whose GPUs the dashboard shows first (``--slurm-job``, or the allocation it runs in)."""
        self.status_label = ""
        """What the status bar names besides the host (a replay's file)."""
        self.set_reactive(GputopApp.interval_s, interval_s)
        self.mode.attach(self)

    @property
    def history(self) -> History:
        return self.feed.history

    @property
    def readonly(self) -> bool:
        """No signals: asked for (``--readonly``), or the processes shown are not live ones of this machine."""
        return self.readonly_everywhere or not self.feed.signals_allowed

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
        self.feed.start(self)
        # A snapshot the feed has at hand already (the live dashboard's, made for its plain first frame) is taken
        # now, not when its wake-up message comes: the screens then mount with it and their first frame shows it.
        if self.feed.take():
            self.show()
        self.push_screen(self.mode.main_screen())
        if self.job_id is not None:
            from gputop.ui.screens.job import JobScreen

            self.push_screen(JobScreen(self.job_id))
        self.mode.mounted()
        # The first frame drawn, the collector the gputop command held while starting resumes (gputop.startup).
        self.call_after_refresh(startup.resume)

    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Close the dashboard. The feed begins to stop at once, beside Textual's own way out (its input thread
        takes 0.1 to 0.2 s to end): the two waits overlap instead of adding up."""
        self.feed.stop_soon()
        super().exit(result, return_code, message)

    def on_unmount(self) -> None:
        self.feed.stop()

    def wake(self) -> None:
        """Any thread: the feed has snapshots waiting (``FeedClient``)."""
        self.post_message(self.SnapshotsArrived())

    def on_gputop_app_snapshots_arrived(self, _: SnapshotsArrived) -> None:
        if self.feed.take() and not self.paused:
            self.show()

    def show(self) -> None:
        """Show the feed's newest snapshot and its findings (``FeedClient``)."""
        if self.feed.latest is None:
            return
        # The findings first: the screens redraw on ``snapshot`` and read both.
        self.advice = self.feed.advice
        self.snapshot = self.feed.latest

    def ended(self, ended: Ended) -> None:
        """The job the feed watched has ended (``FeedClient``): its last view is shown, and stays, marked final."""
        self.paused = False
        self.status_label = "JOB ENDED"
        self.show()
        self.final = ended
        self.refresh_bindings()  # no pause, interval or signal keys over a view that no longer changes

    def action_toggle_pause(self) -> None:
        self.mode.toggle_pause()

    def action_mode(self, name: str, *args: object) -> None:
        """A key of the mode's: ``mode('speed', 1)`` calls ``mode.action_speed(1)``."""
        getattr(self.mode, f"action_{name}")(*args)

    def action_slower(self) -> None:
        self.interval_s = next_interval(self.interval_s, longer=True)

    def action_faster(self) -> None:
        self.interval_s = next_interval(self.interval_s, longer=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.key_allowed(action)

    def key_allowed(self, action: str) -> bool:
        """Whether ``action`` applies here: no interval keys over a feed with its own, no signals when read-only."""
        if action in ("slower", "faster"):
            return not self.feed.interval_fixed
        if action == "toggle_pause":
            return self.final is None
        return not (action == "signal" and self.readonly)

    def watch_interval_s(self, interval_s: float) -> None:
        self.feed.set_interval(interval_s)

    def key_help(self) -> list[tuple[str, str]]:
        """Every key that works now, read from the bindings of the mode and its screens."""
        return key_help(self.mode.help_groups(), self.key_allowed)

    def on_key(self, event: events.Key) -> None:
        """A key that reached the app and that no binding here takes (a habit from htop or nvitop, a key of another
        screen) is not ignored in silence: the footer says so for a moment (a dialog without one, a notification).
        Runs before Textual's own handler, which then looks for a binding of the key."""
        if event.key in self.screen.active_bindings:
            return
        display = self.get_key_display(Binding(event.key, ""))
        words = unbound_words(event.key, display, bound_keys(self.mode.help_groups()))
        footers = self.screen.query(Footer)
        if footers:
            footers.first().say(words)
        else:
            self.notify(words, timeout=3)

    def action_help(self) -> None:
        from gputop.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.key_help()))


def run_dashboard(
    feed: Feed,
    *,
    interval_s: float,
    focus_pid: int | None = None,
    readonly: bool = False,
    notice: str | None = None,
    job_id: str | None = None,
    close: threading.Event | None = None,
    allocation: Allocation | None = None,
) -> int:
    """Run the dashboard over ``feed`` until the user quits; returns the exit status. The feed is made by the
    command that shows it (a live one: gputop/cli/watch.py, gputop/run/watch.py) and stopped here on the way out.
    ``notice`` is a line for the banner; ``job_id`` opens that job's view on top (``--job``). Setting ``close``,
    from any thread, closes the dashboard as ``q`` does (``gputop run`` when its terminal hangs up)."""
    app = GputopApp(
        feed,
        interval_s=interval_s,
        focus_pid=focus_pid,
        readonly=readonly,
        notice=notice,
        job_id=job_id,
        allocation=allocation,
    )
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
        feed.stop()
    return app.return_code or 0
