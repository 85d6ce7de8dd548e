"""The replay's feed and mode for the dashboard app: play and pause, speed, steps and jumps, paced by the
recorded times.

``ReplaySource`` delivers the snapshot at a position where it is driven: the player moves it on the app's UI
thread, and the snapshot is shown at once. The advisor does not run on the snapshots as they are shown: its
findings over the whole recording are computed once, in a thread with its own connection to the file, and the
dashboard shows those of the snapshot on screen, as the live advisor gave them at that time.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
from pathlib import Path

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from gputop.advisor.window import AdvisorConfig, replay_config
from gputop.formatting import counted, fmt_length
from gputop.model import Advice, Snapshot
from gputop.store import RecordingError
from gputop.ui.app import GputopApp, Mode, dashboard_help_groups
from gputop.ui.feed import FeedClient
from gputop.ui.history import HISTORY_S, History
from gputop.ui.keys import HelpGroup
from gputop.ui.replay.findings import Findings, compute_findings
from gputop.ui.replay.screen import ReplayDashboardScreen
from gputop.ui.replay.source import ReplayError, ReplaySource, recording_notices
from gputop.ui.replay.time import SPEEDS, fmt_speed, next_speed, resolve_time
from gputop.ui.widgets.timeline_bar import TimelineView

FRAME_S = 1 / 30
"""Playback shows a new snapshot at most this often; at high speeds the ones between go into the graphs only."""
FEED_ALL = 32
"""Up to this many snapshots between two shown go into the graphs one by one; more, then one per second (the
graphs' resolution), so a fast replay of a 0.1 s recording does not decode ten snapshots per recorded second."""
GAP_WAIT_S = 3.0
"""A big gap in the recording (the recorder was stopped) is waited out this long at most, then skipped."""
BIG_GAP_INTERVALS = 5
"""A gap longer than this many sampling intervals (and 2 s) is a big gap."""
PROGRESS_EVERY_S = 0.25

BINDINGS: list[BindingType] = [
    Binding("space,p", "toggle_pause", "Play/pause", key_display="space", tooltip="Play or pause the replay"),
    Binding(
        "right_square_bracket,greater_than_sign",
        "mode('speed', 1)",
        "Faster",
        key_display="]",
        tooltip=f"Play faster, up to {fmt_speed(SPEEDS[-1])}; > too",
    ),
    Binding(
        "left_square_bracket,less_than_sign",
        "mode('speed', -1)",
        "Slower",
        show=False,
        key_display="[",
        tooltip=f"Play slower, down to {fmt_speed(SPEEDS[0])}; < too",
    ),
    Binding("full_stop", "mode('step', 1)", "Step", key_display=".", tooltip="One snapshot forward (pauses)"),
    Binding("comma", "mode('step', -1)", "Back", show=False, key_display=",", tooltip="One snapshot back (pauses)"),
    Binding(
        "right_curly_bracket,shift+right",
        "mode('skip', 60)",
        "+1 min",
        show=False,
        key_display="}",
        tooltip="A minute forward; shift+→ too",
    ),
    Binding(
        "left_curly_bracket,shift+left",
        "mode('skip', -60)",
        "-1 min",
        show=False,
        key_display="{",
        tooltip="A minute back; shift+← too",
    ),
    Binding(
        "0,ctrl+home", "mode('bounds', 0)", "Start", show=False, key_display="0", tooltip="The start; Ctrl+Home too"
    ),
    Binding(
        "dollar_sign,ctrl+end", "mode('bounds', 1)", "End", show=False, key_display="$", tooltip="The end; Ctrl+End too"
    ),
]
"""The replay's keys, app-wide (``ReplayApp``'s): ``space`` and ``p`` play and pause instead of freezing the
display."""


class ReplayPlayer(Mode):
    """The dashboard over a ``ReplaySource`` (``Feed`` and ``Mode`` both): read-only, its findings from the whole
    recording, with a timeline. ``ReplayError`` when the recording has nothing to show."""

    signals_allowed = False  # nothing on screen is a live process
    interval_fixed = True  # a recording's interval is its own

    def __init__(
        self,
        source: ReplaySource,
        *,
        speed: float = 1.0,
        start_time: float | None = None,
        play: bool = True,
        advisor_config: AdvisorConfig | None = None,
    ) -> None:
        if not len(source):
            raise ReplayError(f"{Path(source.recording.info.path).name} has no snapshots yet")
        first = source.readable(0)
        start = source.readable(source.index_at(start_time) if start_time is not None else 0)
        if first is None or start is None:
            snapshots = counted(len(source), "snapshot")
            raise ReplayError(f"none of the {snapshots} in {source.recording.info.path} can be read")
        first_snapshot = source.read(first)
        self.recorded_focus = first_snapshot.focus_pid if first_snapshot is not None else None
        """The process the recording followed (its first snapshot's focus: the snapshot itself is not kept)."""
        self.source = source
        self.advisor_config = advisor_config or replay_config(None, source.recording.info.window_s)
        """The run's window, where it recorded one: the findings are the ones its advisor gave."""
        self.speed = speed
        self.play = play and start < len(source) - 1
        self.history = History()
        self.latest: Snapshot | None = None
        self.findings: Findings | None = None
        self.timeline_view = TimelineView()
        self._findings_done = 0
        self._progress_timer: Timer | None = None
        self._timer: Timer | None = None
        self._anchor_time = 0.0
        self._anchor_wall = 0.0
        self._shown_wall = 0.0
        info = source.recording.info
        self.interval_s = info.interval_s or 1.0
        diffs = [b - a for a, b in zip(source.times, source.times[1:], strict=False) if b > a]
        interval = info.interval_s or (statistics.median(diffs) if diffs else 1.0)
        self.big_gap_s = max(2.0, BIG_GAP_INTERVALS * interval)
        """Snapshots further apart than this have a gap between them: the recorder was not running."""
        source.position = start
        self.position = start
        """The position of the snapshot on screen in the recording."""
        self._feed(self._positions_before(start))
        self.dashboard = ReplayDashboardScreen(self)

    def focus_pid(self, pid: int | None) -> int | None:
        """The process to follow: ``pid`` if given, else the one the recording followed."""
        if pid is not None:
            return pid
        return self.recorded_focus

    # -- Feed -------------------------------------------------------------------------------------------------

    @property
    def advice(self) -> tuple[Advice, ...]:
        return self.findings.at(self.position) if self.findings is not None else ()

    def start(self, client: FeedClient) -> None:
        """Deliver the snapshot at the start position; from now on every move shows its snapshot at once."""
        self.client = client
        self.source.subscribe(self._receive)
        self.source.start()

    def take(self) -> bool:
        return False  # the source delivers on the UI thread, where the player moves it: no inbox

    def stop(self) -> None:
        """Nothing runs on its own: there is nothing to stop."""

    def stop_soon(self) -> None:
        """Nothing runs on its own: there is nothing to begin stopping."""

    def set_interval(self, interval_s: float) -> None:
        """A recording keeps its own pace; the replay's speed scales it."""

    def _receive(self, snap: Snapshot) -> None:
        self.history.record(snap)
        self.latest = snap
        self.position = self.source.position
        self._shown_wall = time.monotonic()
        self.client.show()
        self._show_timeline()

    # -- Mode -------------------------------------------------------------------------------------------------

    def attach(self, app: GputopApp) -> None:
        super().attach(app)
        app.status_label = f"REPLAY {Path(self.source.recording.info.path).name}"
        app.notices = tuple(recording_notices(self.source))
        app.set_reactive(GputopApp.paused, not self.play)
        app.set_reactive(GputopApp.advice_note, self._progress_note())

    def main_screen(self) -> Screen[None]:
        return self.dashboard

    def help_groups(self) -> list[HelpGroup]:
        """The replay's keys first, then the dashboard's that still apply."""
        return [BINDINGS, ReplayDashboardScreen.BINDINGS, *dashboard_help_groups()]

    def mounted(self) -> None:
        # The worker and the timers are the dashboard screen's: they draw into it, and end with it, before its
        # widgets are taken down. The screen hands the worker's end back to ``findings_changed``.
        dashboard = self.dashboard
        dashboard.run_worker(self._compute_findings, name="findings", thread=True, exit_on_error=False)
        self._progress_timer = dashboard.set_interval(PROGRESS_EVERY_S, self._show_progress)
        self.app.call_later(self._restart_clock)

    def toggle_pause(self) -> None:
        app = self.app
        if app.paused and self.position >= len(self.source) - 1:
            self.go(0)  # played to the end: play again from the start
        app.paused = not app.paused
        self._restart_clock()

    # -- showing a snapshot -----------------------------------------------------------------------------------

    def _show_timeline(self) -> None:
        source = self.source
        at = self.position
        progress = None if self.findings is not None else self._findings_done / len(source)
        self.timeline_view = TimelineView(
            start=source.times[0],
            end=source.times[-1],
            at=source.times[at],
            clock=source.clock[at],
            playing=not self.app.paused,
            speed=self.speed,
            progress=progress,
        )
        self.dashboard.show_timeline(self.timeline_view)

    # -- moving -----------------------------------------------------------------------------------------------

    def go(self, position: int, direction: int = 1, *, keep_clock: bool = False) -> None:
        """Show the snapshot at ``position`` (or the nearest readable one, looking in ``direction`` first), with
        the graphs as they were then."""
        source = self.source
        target = source.readable(position, direction)
        if target is None or target == self.position:
            self._show_timeline()
            return
        current = self.position
        if target > current and source.times[target] - source.times[current] <= HISTORY_S:
            self._feed(range(current + 1, target))
        else:
            self.history = History()
            self._feed(self._positions_before(target))
        if position != target and position in source.unreadable:
            self.app.notify(source.unreadable[position], title="Skipped a snapshot", severity="warning")
        source.seek(target)
        if not keep_clock:
            self._restart_clock()

    def _positions_before(self, position: int) -> range:
        """The positions whose snapshots the graphs hold when ``position`` is on screen."""
        times = self.source.times
        return range(bisect.bisect_left(times, times[position] - HISTORY_S), position)

    def _feed(self, positions: range) -> None:
        """Put these snapshots into the graphs (one per second when there are many)."""
        source = self.source
        thin = len(positions) > FEED_ALL
        last_second: int | None = None
        for k in positions:
            second = math.floor(source.times[k])
            if thin and second == last_second:
                continue
            snap = source.read(k)
            if snap is not None:
                last_second = second
                self.history.record(snap)

    def jump_text(self, text: str) -> str | None:
        """Jump to the time ``text`` names (``resolve_time``); returns the error in one line, or None."""
        times = self.source.times
        try:
            at = resolve_time(text, start=times[0], end=times[-1], current=times[self.position])
        except ValueError as exc:
            return str(exc)
        self.go(self.source.index_at(at), 1 if at >= times[self.position] else -1)
        return None

    def action_step(self, step: int) -> None:
        self.app.paused = True
        self.go(self.position + step, step)

    def action_skip(self, seconds: float) -> None:
        source = self.source
        target = source.index_at(source.times[self.position] + seconds)
        if seconds > 0 and target == self.position:
            target += 1  # at least one snapshot on, even over a gap longer than the skip
        self.go(target, 1 if seconds > 0 else -1)

    def action_bounds(self, end: int) -> None:
        self.go(len(self.source) - 1 if end else 0, -1 if end else 1)

    def action_speed(self, direction: int) -> None:
        self.speed = next_speed(self.speed, direction > 0)
        self._restart_clock()

    # -- playing ----------------------------------------------------------------------------------------------

    def _restart_clock(self) -> None:
        """Play on from the snapshot on screen, as of now (after a move, a speed change, play or pause)."""
        self._anchor_time = self.source.times[self.position]
        self._anchor_wall = time.monotonic()
        self._schedule()
        self._show_timeline()

    def _schedule(self) -> None:
        """Set the timer for the next snapshot due, when playing."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        app = self.app
        if app.paused:
            return
        times, at = self.source.times, self.position
        if at >= len(times) - 1:
            app.paused = True
            self._show_timeline()
            app.notify("The end of the recording: space plays it again from the start.", title="Replay")
            return
        due = self._anchor_wall + (times[at + 1] - self._anchor_time) / self.speed
        if times[at + 1] - times[at] > self.big_gap_s:
            due = min(due, self._shown_wall + GAP_WAIT_S)
        self._timer = self.dashboard.set_timer(max(FRAME_S, due - time.monotonic()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.app.paused:
            return
        times, at = self.source.times, self.position
        now = time.monotonic()
        target = bisect.bisect_right(times, self._anchor_time + (now - self._anchor_wall) * self.speed) - 1
        if target > at:
            self.go(target, keep_clock=True)
        elif (
            at + 1 < len(times)
            and times[at + 1] - times[at] > self.big_gap_s
            and now >= self._shown_wall + GAP_WAIT_S - FRAME_S
        ):
            gap = times[at + 1] - times[at]
            self.app.notify(f"Skipped {fmt_length(gap)} without snapshots (the recorder was not running).", title="Gap")
            self.go(at + 1)
            return  # go restarted the clock at the snapshot after the gap
        self._schedule()

    # -- the findings -----------------------------------------------------------------------------------------

    def _compute_findings(self) -> Findings | None:
        worker = get_current_worker()

        def progress(done: int) -> bool:
            self._findings_done = done
            return not worker.is_cancelled

        source = self.source
        return compute_findings(
            source.recording.info.path, list(source.rows), self.app.focus_pid, self.advisor_config, progress
        )

    def _progress_note(self) -> str:
        n = len(self.source)
        done = self._findings_done / n
        return f"Computing the advisor's findings over the recording: {done:.0%} of {counted(n, 'snapshot')}"

    def _show_progress(self) -> None:
        if self.findings is None:
            self.app.advice_note = self._progress_note()
            self._show_timeline()

    def findings_changed(self, event: Worker.StateChanged) -> None:
        """The findings' worker moved on: when it is done, show its findings (or why there are none)."""
        if event.worker.name != "findings" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        if self._progress_timer is not None:
            self._progress_timer.stop()
        app = self.app
        if event.state == WorkerState.ERROR or event.worker.result is None:
            error = event.worker.error
            reason = str(error) if isinstance(error, RecordingError) else repr(error)
            app.advice_note = f"The advisor's findings could not be computed: {reason}"
            return
        self.findings = event.worker.result
        failed = self.findings.timeline.failed
        if failed:
            app.notices = (*app.notices, f"{failed}: no findings are shown after that")
        count = self.findings.undecodable
        if count:
            said = "1 snapshot does not decode: it is" if count == 1 else f"{count} snapshots do not decode: they are"
            app.notices = (*app.notices, f"{said} stepped over")
        app.advice = self.advice
        self.dashboard.set_track()
        app.advice_note = ""
        self._show_timeline()
