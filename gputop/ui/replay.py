"""``gputop replay FILE``: the dashboard over a recording, with a timeline.

``ReplaySource`` is the ``SnapshotSource`` of a replay: it reads the snapshot at a position of the recording when
asked (a small cache keeps the recent ones), never the whole file, and delivers it where it is driven: the app
moves it on its own UI thread. ``ReplayApp`` is the dashboard that drives it: play and pause, speed, steps and jumps,
paced by the recorded times. The advisor does not run on the snapshots as they are shown: its findings over the
whole recording are computed once, in a thread with its own connection to the file, and the dashboard shows those
of the snapshot on screen, as the live advisor gave them at that time.
"""

from __future__ import annotations

import bisect
import math
import statistics
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import Footer, Input
from textual.worker import Worker, WorkerState, get_current_worker

from gputop.advisor.timeline import AdviceTimeline, advise
from gputop.advisor.window import AdvisorConfig
from gputop.formatting import fmt_length
from gputop.model import Advice, Snapshot
from gputop.store import Recording, RecordingError, open_recording
from gputop.ui.app import GputopApp, key_help
from gputop.ui.history import HISTORY_S, History
from gputop.ui.replay_time import JUMP_FORMS, SPEEDS, fmt_speed, next_speed, resolve_time
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.timeline_bar import TimelineBar, TimelineView

SNAPSHOT_CACHE = 512
"""Decoded snapshots kept: more than the sparklines' five minutes at 1 s, so a step back rebuilds them from memory."""
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


class ReplayError(Exception):
    """A recording with nothing to replay: reported as one line, exit status 1."""


class ReplaySource:
    """The snapshots of a recording by position (0 = the first row): read on demand, delivered on ``seek``.

    ``times`` is the recorded time of each position, made non-decreasing (a wall clock stepped back during the
    recording would otherwise tangle the timeline); ``clock`` the times as recorded, for display.
    """

    def __init__(self, recording: Recording, index: list[tuple[int, float]] | None = None) -> None:
        self.recording = recording
        index = recording.index() if index is None else index
        self.rows = [rowid for rowid, _ in index]
        self.clock = [at for _, at in index]
        self.times: list[float] = []
        for at in self.clock:
            self.times.append(max(at, self.times[-1]) if self.times else at)
        self.position = 0
        self.unreadable: dict[int, str] = {}
        """Positions whose row could not be read, with the reason."""
        self._subscribers: list[Callable[[Snapshot], None]] = []
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()

    def __len__(self) -> int:
        return len(self.rows)

    # -- SnapshotSource ---------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Snapshot], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        """Deliver the snapshot at ``position`` (the replay's start)."""
        self.seek(self.position)

    def stop(self) -> None:
        """Nothing runs on its own: there is nothing to stop."""

    def set_interval(self, interval_s: float) -> None:
        """A recording keeps its own pace; the replay's speed scales it."""

    # -- reading ----------------------------------------------------------------------------------------------

    def read(self, position: int) -> Snapshot | None:
        """The snapshot at ``position``, or None when its row cannot be read (``unreadable`` says why)."""
        snap = self._cache.get(position)
        if snap is not None:
            self._cache.move_to_end(position)
            return snap
        if position in self.unreadable:
            return None
        try:
            snap = self.recording.read(self.rows[position])
        except RecordingError as exc:
            self.unreadable[position] = str(exc)
            return None
        self._cache[position] = snap
        if len(self._cache) > SNAPSHOT_CACHE:
            self._cache.popitem(last=False)
        return snap

    def readable(self, position: int, direction: int = 1) -> int | None:
        """The readable position nearest to ``position`` in ``direction`` (``position`` itself first), else the
        nearest on the other side; None when no row can be read."""
        if not len(self):
            return None
        position = min(len(self) - 1, max(0, position))
        if direction >= 0:
            passes = (range(position, len(self)), range(position - 1, -1, -1))
        else:
            passes = (range(position, -1, -1), range(position + 1, len(self)))
        for candidates in passes:
            for k in candidates:
                if self.read(k) is not None:
                    return k
        return None

    def seek(self, position: int) -> None:
        """Deliver the snapshot at ``position`` (which must be readable: ``readable``) to every subscriber."""
        snap = self.read(position)
        if snap is None:
            return
        self.position = position
        for callback in self._subscribers:
            callback(snap)

    def index_at(self, at: float) -> int:
        """The last position at or before time ``at`` (the first for an earlier time)."""
        return max(0, bisect.bisect_right(self.times, at) - 1)

    def nearest(self, at: float) -> int:
        """The position whose time is nearest to ``at``."""
        after = min(len(self) - 1, bisect.bisect_left(self.times, at))
        before = max(0, after - 1)
        return before if at - self.times[before] <= self.times[after] - at else after


@dataclass(frozen=True)
class Findings:
    """The advisor over the whole recording: its findings at each position, and their highest severity rank."""

    timeline: AdviceTimeline
    advice_at: list[int]
    """The timeline's index for each position (a row that could not be read keeps the findings before it)."""
    marks: list[int]
    """The highest severity rank of the findings at each position, -1 for none (the timeline strip)."""
    undecodable: int
    """Rows that could not be read or decoded: stepped over by the replay, left out by the advisor."""

    def at(self, position: int) -> tuple[Advice, ...]:
        return self.timeline.at(self.advice_at[position]) if 0 <= position < len(self.advice_at) else ()


def compute_findings(
    path: str, rows: list[int], pid: int | None, config: AdvisorConfig | None, progress: Callable[[int], bool]
) -> Findings | None:
    """Run the advisor over the rows of the recording at ``path``, read through a connection of its own.

    ``progress(done)`` is called before each row; when it returns False the work stops and None is returned.
    """
    decoded: list[int] = []
    stopped = False

    with open_recording(path) as recording:

        def snapshots() -> Iterator[Snapshot]:
            nonlocal stopped
            for position, rowid in enumerate(rows):
                if not progress(position):
                    stopped = True
                    return
                try:
                    snap = recording.read(rowid)
                except RecordingError:
                    continue
                decoded.append(position)
                yield snap

        timeline = advise(snapshots(), pid, config)
    if stopped:
        return None
    advice_at = [bisect.bisect_right(decoded, position) - 1 for position in range(len(rows))]
    marks = [max((a.severity_rank for a in timeline.at(k)), default=-1) for k in advice_at]
    return Findings(timeline, advice_at, marks, len(rows) - len(decoded))


class _FromTheTimeline:
    """Stands in for the live advisor: a replay shows the findings computed over the whole recording."""

    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        return ()


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


class ReplayDashboardScreen(DashboardScreen):
    """The dashboard with the timeline bar above the footer and ``g`` to jump to a time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "jump", "Jump", tooltip=f"Jump to a time: {JUMP_FORMS}"),
        # Still there, and listed by ?, but out of the footer: its room at 80 columns goes to the replay's keys.
        Binding("slash", "filter", "Filter", show=False),
        Binding("t", "toggle_tree", "Tree", show=False),
        Binding("s", "next_sort", "Sort", show=False),
    ]
    reserved_lines = TimelineBar.LINES

    @property
    def replay(self) -> ReplayApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, Footer):
                yield TimelineBar()
                yield Footer(compact=True)  # room for the replay's keys at 80 columns
                yield JumpInput()  # after the footer, to be drawn over it
            else:
                yield widget

    def on_mount(self) -> None:
        bar = self.query_one(TimelineBar)
        self.watch(self.replay, "timeline_view", lambda view: setattr(bar, "view", view))
        self.watch(self.replay, "findings_ready", self._set_track)

    def _set_track(self) -> None:
        app = self.replay
        marks = app.findings.marks if app.findings is not None else None
        self.query_one(TimelineBar).set_track(app.replay_source.times, marks, app.big_gap_s)

    def action_jump(self) -> None:
        self.query_one(JumpInput).open()

    @on(Input.Submitted, "#jump")
    def _jump(self, event: Input.Submitted) -> None:
        field = self.query_one(JumpInput)
        error = self.replay.jump_text(event.value)
        if error:
            field.show_error(error)
        else:
            field.action_close()

    @on(TimelineBar.Seek)
    def _seek(self, event: TimelineBar.Seek) -> None:
        self.replay.go(self.replay.replay_source.nearest(event.time))


LIVE_ONLY_ACTIONS = ("toggle_pause", "slower", "faster")
"""The live dashboard's keys a replay replaces or has no use for."""


def replay_key_help() -> list[tuple[str, str]]:
    """The replay's keys first, then the dashboard's that still apply."""
    rows = [
        (binding.key_display or binding.key, binding.tooltip)
        for owner in (ReplayApp, ReplayDashboardScreen)
        for binding in owner.BINDINGS
        if isinstance(binding, Binding) and binding.tooltip
    ]
    live_only = {
        (binding.key_display or binding.key, binding.tooltip)
        for binding in GputopApp.BINDINGS
        if isinstance(binding, Binding) and binding.action in LIVE_ONLY_ACTIONS
    }
    return rows + [row for row in key_help(readonly=True) if row not in live_only]


class ReplayApp(GputopApp):
    """The dashboard over a ``ReplaySource``: read-only, its findings from the whole recording, with a timeline."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space,p", "toggle_pause", "Play/pause", key_display="space", tooltip="Play or pause the replay"),
        Binding(
            "right_square_bracket,greater_than_sign",
            "speed(1)",
            "Faster",
            key_display="]",
            tooltip=f"Play faster, up to {fmt_speed(SPEEDS[-1])}; > too",
        ),
        Binding(
            "left_square_bracket,less_than_sign",
            "speed(-1)",
            "Slower",
            show=False,
            key_display="[",
            tooltip=f"Play slower, down to {fmt_speed(SPEEDS[0])}; < too",
        ),
        Binding("full_stop", "step(1)", "Step", key_display=".", tooltip="One snapshot forward (pauses)"),
        Binding("comma", "step(-1)", "Back", show=False, key_display=",", tooltip="One snapshot back (pauses)"),
        Binding(
            "right_curly_bracket,shift+right",
            "skip(60)",
            "+1 min",
            show=False,
            key_display="}",
            tooltip="A minute forward; shift+→ too",
        ),
        Binding(
            "left_curly_bracket,shift+left",
            "skip(-60)",
            "-1 min",
            show=False,
            key_display="{",
            tooltip="A minute back; shift+← too",
        ),
        Binding("0,ctrl+home", "bounds(0)", "Start", show=False, key_display="0", tooltip="The start; Ctrl+Home too"),
        Binding(
            "dollar_sign,ctrl+end", "bounds(1)", "End", show=False, key_display="$", tooltip="The end; Ctrl+End too"
        ),
    ]

    position: var[int] = var(0)
    """The position of the snapshot on screen in the recording."""
    speed: var[float] = var(1.0)
    timeline_view: var[TimelineView] = var(TimelineView)
    findings_ready: var[bool] = var(False)

    def __init__(
        self,
        source: ReplaySource,
        *,
        speed: float = 1.0,
        start_time: float | None = None,
        pid: int | None = None,
        play: bool = True,
        user: str | None = None,
        advisor_config: AdvisorConfig | None = None,
    ) -> None:
        if not len(source):
            raise ReplayError(f"{Path(source.recording.info.path).name} has no snapshots yet")
        first = source.readable(0)
        start = source.readable(source.index_at(start_time) if start_time is not None else 0)
        if first is None or start is None:
            raise ReplayError(f"none of the {len(source)} snapshots in {source.recording.info.path} can be read")
        first_snap = source.read(first)
        focus = pid if pid is not None else first_snap.focus_pid if first_snap is not None else None
        info = source.recording.info
        super().__init__(
            source,
            interval_s=info.interval_s or 1.0,
            focus_pid=focus,
            readonly=True,  # nothing on screen is a live process
            user=user,
            advisor=_FromTheTimeline(),  # type: ignore[arg-type]
        )
        self.replay_source = source
        self.advisor_config = advisor_config
        self.status_label = f"REPLAY {Path(info.path).name}"
        self.notices = tuple(recording_notices(source))
        self.findings: Findings | None = None
        self._findings_done = 0
        self._progress_timer: Timer | None = None
        self._timer: Timer | None = None
        self._anchor_time = 0.0
        self._anchor_wall = 0.0
        self._shown_wall = 0.0
        diffs = [b - a for a, b in zip(source.times, source.times[1:], strict=False) if b > a]
        interval = info.interval_s or (statistics.median(diffs) if diffs else 1.0)
        self.big_gap_s = max(2.0, BIG_GAP_INTERVALS * interval)
        """Snapshots further apart than this have a gap between them: the recorder was not running."""
        self.set_reactive(ReplayApp.speed, speed)
        self.set_reactive(GputopApp.paused, not play or start >= len(source) - 1)
        self.set_reactive(GputopApp.advice_note, self._progress_note())
        source.position = start
        self.set_reactive(ReplayApp.position, start)
        self._feed(self._positions_before(start))

    # -- showing a snapshot -----------------------------------------------------------------------------------

    def dashboard_screen(self) -> DashboardScreen:
        return ReplayDashboardScreen()

    def on_mount(self) -> None:
        self.run_worker(self._compute_findings, name="findings", thread=True, exit_on_error=False)
        self._progress_timer = self.set_interval(PROGRESS_EVERY_S, self._show_progress)
        self.call_later(self._restart_clock)

    def _receive(self, snap: Snapshot) -> None:
        """The replay source delivers on the UI thread, where the app moves it: shown at once, no inbox."""
        self.history.record(snap)
        self.latest = snap
        self.position = self.replay_source.position
        self._shown_wall = time.monotonic()
        self._show(snap)
        self._show_timeline()

    def _show(self, snap: Snapshot) -> None:
        self.advice = self.findings.at(self.position) if self.findings is not None else ()
        self.snapshot = snap

    def _show_timeline(self) -> None:
        source = self.replay_source
        at = self.position
        progress = None if self.findings is not None else self._findings_done / len(source)
        self.timeline_view = TimelineView(
            start=source.times[0],
            end=source.times[-1],
            at=source.times[at],
            clock=source.clock[at],
            playing=not self.paused,
            speed=self.speed,
            progress=progress,
        )

    # -- moving -----------------------------------------------------------------------------------------------

    def go(self, position: int, direction: int = 1, *, keep_clock: bool = False) -> None:
        """Show the snapshot at ``position`` (or the nearest readable one, looking in ``direction`` first), with
        the graphs as they were then."""
        source = self.replay_source
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
            self.notify(source.unreadable[position], title="Skipped a snapshot", severity="warning")
        source.seek(target)
        if not keep_clock:
            self._restart_clock()

    def _positions_before(self, position: int) -> range:
        """The positions whose snapshots the graphs hold when ``position`` is on screen."""
        times = self.replay_source.times
        return range(bisect.bisect_left(times, times[position] - HISTORY_S), position)

    def _feed(self, positions: range) -> None:
        """Put these snapshots into the graphs (one per second when there are many)."""
        source = self.replay_source
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
        times = self.replay_source.times
        try:
            at = resolve_time(text, start=times[0], end=times[-1], current=times[self.position])
        except ValueError as exc:
            return str(exc)
        self.go(self.replay_source.index_at(at), 1 if at >= times[self.position] else -1)
        return None

    def action_step(self, step: int) -> None:
        self.paused = True
        self.go(self.position + step, step)

    def action_skip(self, seconds: float) -> None:
        source = self.replay_source
        target = source.index_at(source.times[self.position] + seconds)
        if seconds > 0 and target == self.position:
            target += 1  # at least one snapshot on, even over a gap longer than the skip
        self.go(target, 1 if seconds > 0 else -1)

    def action_bounds(self, end: int) -> None:
        self.go(len(self.replay_source) - 1 if end else 0, -1 if end else 1)

    def action_speed(self, direction: int) -> None:
        self.speed = next_speed(self.speed, direction > 0)
        self._restart_clock()

    def action_toggle_pause(self) -> None:
        if self.paused and self.position >= len(self.replay_source) - 1:
            self.go(0)  # played to the end: play again from the start
        self.paused = not self.paused
        self._restart_clock()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action not in ("slower", "faster")  # a recording's interval is its own

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(replay_key_help()))

    # -- playing ----------------------------------------------------------------------------------------------

    def _restart_clock(self) -> None:
        """Play on from the snapshot on screen, as of now (after a move, a speed change, play or pause)."""
        self._anchor_time = self.replay_source.times[self.position]
        self._anchor_wall = time.monotonic()
        self._schedule()
        self._show_timeline()

    def _schedule(self) -> None:
        """Set the timer for the next snapshot due, when playing."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.paused:
            return
        times, at = self.replay_source.times, self.position
        if at >= len(times) - 1:
            self.paused = True
            self._show_timeline()
            self.notify("The end of the recording: space plays it again from the start.", title="Replay")
            return
        due = self._anchor_wall + (times[at + 1] - self._anchor_time) / self.speed
        if times[at + 1] - times[at] > self.big_gap_s:
            due = min(due, self._shown_wall + GAP_WAIT_S)
        self._timer = self.set_timer(max(FRAME_S, due - time.monotonic()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.paused:
            return
        times, at = self.replay_source.times, self.position
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
            self.notify(f"Skipped {fmt_length(gap)} without snapshots (the recorder was not running).", title="Gap")
            self.go(at + 1)
            return  # go restarted the clock at the snapshot after the gap
        self._schedule()

    # -- the findings -----------------------------------------------------------------------------------------

    def _compute_findings(self) -> Findings | None:
        worker = get_current_worker()

        def progress(done: int) -> bool:
            self._findings_done = done
            return not worker.is_cancelled

        source = self.replay_source
        return compute_findings(
            source.recording.info.path, list(source.rows), self.focus_pid, self.advisor_config, progress
        )

    def _progress_note(self) -> str:
        n = len(self.replay_source)
        return f"Computing the advisor's findings over the recording: {self._findings_done / n:.0%} of {n} snapshots"

    def _show_progress(self) -> None:
        if self.findings is None:
            self.advice_note = self._progress_note()
            self._show_timeline()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.name != "findings" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        if self._progress_timer is not None:
            self._progress_timer.stop()
        if event.state == WorkerState.ERROR or event.worker.result is None:
            error = event.worker.error
            reason = str(error) if isinstance(error, RecordingError) else repr(error)
            self.advice_note = f"The advisor's findings could not be computed: {reason}"
            return
        self.findings = event.worker.result
        failed = self.findings.timeline.failed
        if failed:
            self.notices = (*self.notices, f"{failed}: no findings are shown after that")
        count = self.findings.undecodable
        if count:
            said = "1 snapshot does not decode: it is" if count == 1 else f"{count} snapshots do not decode: they are"
            self.notices = (*self.notices, f"{said} stepped over")
        self.advice = self.findings.at(self.position)
        self.findings_ready = True
        self.advice_note = ""
        self._show_timeline()


def recording_notices(source: ReplaySource) -> list[str]:
    """One line each for a damaged recording and one not closed by its recorder."""
    recording = source.recording
    info = recording.info
    name = Path(info.path).name
    notices = []
    damage = recording.damage or ""
    if damage:
        notices.append(f"{damage.replace(info.path, name)}: showing the {len(source)} snapshots that can be read")
    if info.ended is None:
        notices.append(
            f"{name} was not closed by its recorder (still being written, or the recorder was killed): "
            f"showing the {len(source)} snapshots committed when it was opened"
        )
    return notices


def run_replay(
    path: str, speed: float = 1.0, at: str | None = None, pid: int | None = None, paused: bool = False
) -> int:
    """``gputop replay``: returns the exit status; bad input is one line on stderr."""
    try:
        recording = open_recording(path)
    except RecordingError as exc:
        print(f"gputop: error: {exc}", file=sys.stderr)
        return 2
    with recording:
        source = ReplaySource(recording)
        start_time = None
        if at is not None and len(source):
            times = source.times
            try:
                start_time = resolve_time(at, start=times[0], end=times[-1], current=times[0])
            except ValueError as exc:
                print(f"gputop: error: --at: {exc}", file=sys.stderr)
                return 2
        try:
            app = ReplayApp(source, speed=speed, start_time=start_time, pid=pid, play=not paused)
        except ReplayError as exc:
            print(f"gputop: error: {exc}", file=sys.stderr)
            return 1
        app.run()
    return app.return_code or 0
