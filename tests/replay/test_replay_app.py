"""``gputop replay`` driven through Textual's Pilot over real recordings: what is on screen at each position, the
keys that move along the timeline, playback, and the advisor's findings as they were at each moment."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from gputop.advisor.timeline import advise
from gputop.formatting import fmt_bytes, fmt_percent
from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.history import HISTORY_S, History
from gputop.ui.replay.jump import JumpInput
from gputop.ui.screens.detail import ProcessDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.widgets.advice_panel import AdvicePanel
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.gpu_card import GpuCard
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.timeline_bar import TimelineBar
from tests.factories import DEADLINE_S, settle
from tests.replay.conftest import MakeReplay, findings_ready
from tests.replay.recordings import record
from tests.ui import scenes, training_scenes

Job = tuple[Path, list[Snapshot]]


def widget_text(widget) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(widget.render_line(y).text for y in range(widget.size.height))


def bar_text(app: GputopApp) -> str:
    return widget_text(app.screen.query_one(TimelineBar))


def card_line(app: GputopApp, label: str) -> str:
    card = app.screen.query_one(GpuCard)
    return next(line for line in widget_text(card).splitlines() if line.strip("│ ").startswith(label))


def assert_shows(app: GputopApp, snap: Snapshot) -> None:
    """The snapshot on screen is ``snap``: the app's, and the GPU's memory and busy share as drawn."""
    assert app.snapshot == snap
    gpu = snap.gpus[0]
    assert f"{fmt_bytes(gpu.memory_used_bytes)} / {fmt_bytes(gpu.memory_total_bytes)}" in card_line(app, "MEM")
    assert f" {fmt_percent(gpu.utilization_gpu_percent)} " in card_line(app, "BUSY")
    assert time.strftime("%H:%M:%S", time.gmtime(snap.time)) in bar_text(app)


async def test_each_step_shows_the_recorded_snapshot(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert app.feed.position == 0
        assert_shows(app, snaps[0])
        for n in range(1, 6):
            await pilot.press("full_stop")
            assert app.feed.position == n
            assert_shows(app, snaps[n])
        await pilot.press("dollar_sign")
        assert_shows(app, snaps[-1])
        app.feed.go(54)
        for n in range(53, 45, -1):  # back across the fix of the job: other values
            await pilot.press("comma")
            assert app.feed.position == n
            assert_shows(app, snaps[n])


async def test_the_status_line_says_replay_with_the_file_and_the_recorded_host(
    make_replay: MakeReplay, job: Job
) -> None:
    path, _ = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        status = widget_text(app.screen.query_one(StatusBar))
        assert "REPLAY job.gputop" in status
        assert scenes.HOSTNAME in status
        assert "every " not in status  # no live interval
        assert "PAUSED" in status


async def test_the_graphs_after_a_jump_are_those_of_that_moment(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("dollar_sign")
        for target in (70, 20):  # back, into the starved stretch, then further back
            app.feed.go(target)
            await pilot.pause()
            expected = History()
            for snap in snaps[: target + 1]:
                if snap.time >= snaps[target].time - HISTORY_S:
                    expected.record(snap)
            now = snaps[target].time
            shown = app.history.gpus[0].busy_percent.sparkline(40, now)
            assert shown == expected.gpus[0].busy_percent.sparkline(40, now)
            assert shown.strip()  # not an empty history
            assert app.history.gpus[0].busy_percent.latest == snaps[target].gpus[0].utilization_gpu_percent


async def test_space_plays_and_pauses(make_replay: MakeReplay, job: Job) -> None:
    path, _ = job
    app = make_replay(path, speed=16.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert app.paused and "paused ×16" in bar_text(app)
        await pilot.press("space")
        assert not app.paused
        await settle(pilot, lambda: app.feed.position >= 3, "playback moving on")
        assert "playing ×16" in bar_text(app)
        await pilot.press("space")
        stopped_at = app.feed.position
        await pilot.pause(0.4)  # at ×16 three snapshots would have come
        assert app.feed.position == stopped_at
        assert "paused" in bar_text(app) and "PAUSED" in widget_text(app.screen.query_one(StatusBar))
        await pilot.press("p")  # p too
        await settle(pilot, lambda: app.feed.position > stopped_at, "playback moving on again")


async def test_playback_pauses_at_the_end_and_plays_again_from_the_start(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path, speed=64.0)
    async with app.run_test(size=(160, 48)) as pilot:
        app.feed.go(len(snaps) - 4)
        await pilot.press("space")
        await settle(pilot, lambda: app.paused, "a pause at the end")
        assert app.feed.position == len(snaps) - 1
        await pilot.press(*["left_square_bracket"] * 5)
        assert app.feed.speed == 1.0  # a snapshot every 2 s from now on
        await pilot.press("space")
        assert not app.paused
        assert app.feed.position <= 1


async def playback_rate(pilot, app: GputopApp, snapshots: int) -> float:  # type: ignore[no-untyped-def]
    """Snapshots shown per second of wall time while ``snapshots`` go by."""
    first = app.feed.position
    began = time.monotonic()
    await settle(pilot, lambda: app.feed.position >= first + snapshots, f"{snapshots} snapshots played")
    return (app.feed.position - first) / (time.monotonic() - began)


async def test_brackets_change_the_speed_and_playback_follows(make_replay: MakeReplay, job: Job) -> None:
    path, _ = job
    app = make_replay(path, speed=4.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("space")
        slow = await playback_rate(pilot, app, 2)  # 2 s between snapshots at ×4: 2 per second
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.feed.speed == 16.0 and "×16" in bar_text(app)
        fast = await playback_rate(pilot, app, 8)  # 8 per second
        # Four times the speed; a busy machine draws fewer of the 8 snapshots a second than an idle one (5.2
        # against 2.3 beside two busy loops and the suite), so the rate is held to more than half again, which a
        # speed that playback ignored would not reach.
        assert fast > 1.5 * slow
        await pilot.press("space", "right_square_bracket", "right_square_bracket")
        assert app.feed.speed == 64.0  # the top step
        await pilot.press("left_square_bracket")
        assert app.feed.speed == 16.0
        await pilot.press(*["less_than_sign"] * 7)
        assert app.feed.speed == 0.25 and "×0.25" in bar_text(app)
        await pilot.press("greater_than_sign")
        assert app.feed.speed == 0.5


async def test_steps_pause_and_stop_at_the_ends(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path, speed=0.25, play=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert not app.paused
        await pilot.press("full_stop")
        assert app.paused and app.feed.position == 1
        await pilot.press("comma", "comma", "comma")
        assert app.feed.position == 0
        await pilot.press("ctrl+end")
        assert app.feed.position == len(snaps) - 1
        await pilot.press("full_stop")
        assert app.feed.position == len(snaps) - 1
        await pilot.press("ctrl+home")
        assert app.feed.position == 0


async def test_braces_jump_a_minute_and_zero_and_dollar_go_to_the_ends(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("right_curly_bracket")
        assert app.feed.position == 30  # 2 s apart
        assert "+1m00s / 2m58s" in bar_text(app)
        await pilot.press("shift+right")
        assert app.feed.position == 60
        await pilot.press("left_curly_bracket")
        assert app.feed.position == 30
        await pilot.press("shift+left", "shift+left")
        assert app.feed.position == 0
        await pilot.press("dollar_sign")
        assert app.feed.position == len(snaps) - 1
        assert "+2m58s / 2m58s" in bar_text(app)
        await pilot.press("0")
        assert app.feed.position == 0


async def jump(pilot, app: GputopApp, text: str, typed: bool = False) -> JumpInput:  # type: ignore[no-untyped-def]
    """``g``, then ``text`` (key by key when ``typed``) and Enter."""
    await pilot.press("g")
    field = app.screen.query_one(JumpInput)
    assert field.has_focus and field.display and not field.value
    assert app.screen.get_widget_at(2, app.screen.size.height - 1)[0] is field  # over the footer
    if typed:
        await pilot.press(*text)
    else:
        field.value = text
    await pilot.press("enter")
    return field


async def test_g_jumps_to_a_clock_time_an_offset_or_a_time_from_the_start(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    start = snaps[0].time
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        clock = time.strftime("%H:%M:%S", time.gmtime(snaps[40].time))
        field = await jump(pilot, app, clock, typed=True)
        assert app.feed.position == 40
        assert not field.display and not field.has_focus
        await jump(pilot, app, "+90s", typed=True)
        assert snaps[app.feed.position].time == snaps[40].time + 90
        await jump(pilot, app, "-2m")
        assert snaps[app.feed.position].time == snaps[40].time + 90 - 120
        await jump(pilot, app, "1m04s")
        assert snaps[app.feed.position].time == start + 64
        await jump(pilot, app, "+1h")  # past the end: stops there
        assert app.feed.position == len(snaps) - 1
        await jump(pilot, app, "30")
        assert snaps[app.feed.position].time == start + 30
        await jump(pilot, app, time.strftime("%H:%M", time.gmtime(start)))  # the minute it starts in
        assert app.feed.position == 0


async def test_a_bad_time_says_so_in_the_input_and_moves_nothing(make_replay: MakeReplay, job: Job) -> None:
    path, _ = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        app.feed.go(10)
        await pilot.pause()
        for bad, says in (
            ("soon", "not a time: 'soon'"),
            ("25:00", "not a time of day"),
            ("9:00", "not in the recording"),
            ("1h", "past the end"),
        ):
            field = await jump(pilot, app, bad)
            assert app.feed.position == 10
            assert field.display and field.has_class("-error")
            assert says in field.placeholder and "\n" not in field.placeholder
            await pilot.press("escape")
            assert not field.display
        await jump(pilot, app, "+4s")
        assert app.feed.position == 12
        await pilot.press("slash")  # the process filter is drawn over the footer too
        assert app.screen.get_widget_at(2, app.screen.size.height - 1)[0].id == "filter"


async def test_a_click_on_the_strip_jumps_there(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(TimelineBar)
        width = bar.content_size.width
        await pilot.click(TimelineBar, offset=(1 + width // 2, 1))  # past the padding, on the strip's row
        assert abs(app.feed.position - len(snaps) // 2) <= 1
        assert bar.render_line(1).text[width // 2] == "┃"
        await pilot.click(TimelineBar, offset=(1, 1))
        assert app.feed.position == 0


async def test_the_findings_on_screen_are_the_advisors_at_that_snapshot(make_replay: MakeReplay, job: Job) -> None:
    path, snaps = job
    timeline = advise(snaps, training_scenes.JOB_PID)
    with_findings = [i for i in range(len(snaps)) if timeline.at(i)]
    first, last = with_findings[0], with_findings[-1]
    assert first > 0 and last < len(snaps) - 1  # raised after the window, cleared once the job was fixed
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await findings_ready(pilot, app)
        panel = app.screen.query_one(AdvicePanel)
        for i in (0, first - 1, first, (first + last) // 2, last, last + 1, len(snaps) - 1):
            app.feed.go(i)
            await pilot.pause()
            assert app.advice == timeline.at(i)
            assert panel.display == bool(timeline.at(i))
        app.feed.go(first + 5)
        await pilot.pause()
        assert "Advice · 3 findings" in str(panel.border_title)
        assert "num_workers=" in widget_text(panel)
        # the strip marks the findings: warnings where they held, none before
        strip = bar_text(app).splitlines()[1]
        assert "▄" in strip and strip.lstrip()[0] == "─"


async def test_the_findings_panel_says_they_are_being_computed(make_replay: MakeReplay, job: Job, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading

    from gputop.ui.replay import findings

    release = threading.Event()
    real_advise = findings.advise

    def slow_advise(snapshots, pid, config):  # type: ignore[no-untyped-def]
        release.wait(DEADLINE_S)
        return real_advise(snapshots, pid, config)

    monkeypatch.setattr(findings, "advise", slow_advise)
    path, _ = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        app.feed.go(40)
        panel = app.screen.query_one(AdvicePanel)
        await settle(pilot, lambda: panel.display and "Computing" in widget_text(panel), "the panel's word")
        assert "Computing the advisor's findings over the recording" in widget_text(panel)
        assert app.advice == ()
        assert "findings: computing" in bar_text(app)
        release.set()
        await findings_ready(pilot, app)
        assert app.advice and "Computing" not in widget_text(panel)
        assert "findings: computing" not in bar_text(app)


async def test_help_lists_the_replay_keys_and_not_the_live_ones(make_replay: MakeReplay, job: Job) -> None:
    path, _ = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = " ".join(what for _, what in app.screen.keys)
        assert "Play or pause the replay" in text and "Jump to a time" in text and "One snapshot back" in text
        assert "Refresh less often" not in text and "Freeze the display" not in text
        assert "Send SIGINT" not in text  # read-only
        await pilot.press("escape")
        await pilot.press("plus")  # the live interval keys do nothing here
        assert app.interval_s == scenes.TICK_S


async def test_the_other_screens_show_the_recorded_snapshot_and_follow_the_keys(
    make_replay: MakeReplay, job: Job
) -> None:
    path, snaps = job
    app = make_replay(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("k")  # read-only: no signal dialog
        assert type(app.screen).__name__ == "ReplayDashboardScreen"
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessDetailScreen)
        assert "REPLAY job.gputop" in widget_text(app.screen.query_one(StatusBar))
        await pilot.press("full_stop", "k")
        assert app.snapshot == snaps[1] and isinstance(app.screen, ProcessDetailScreen)
        await pilot.press("escape", "right_curly_bracket", "l")
        assert isinstance(app.screen, TrainingScreen)
        await findings_ready(pilot, app)
        panel = app.screen.query_one(AdvicePanel)
        expected = app.feed.findings.at(app.feed.position)  # type: ignore[union-attr]
        assert app.feed.position == 31 and len(expected) == 3
        assert sorted(a.id for a in panel.shown.advice) == sorted(a.id for a in expected) and panel.shown.full


async def test_a_gap_in_the_recording_is_skipped_with_a_notice(
    make_replay: MakeReplay, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from gputop.ui.replay import player

    monkeypatch.setattr(player, "GAP_WAIT_S", 0.3)
    before = [training_scenes.starved_job(scenes.T0 - 600 - 2 * n) for n in range(10, 0, -1)]
    after = [training_scenes.starved_job(scenes.T0 + 2 * n) for n in range(10)]
    path = record(tmp_path / "gap.gputop", [*before, *after])  # the recorder was stopped for ten minutes
    app = make_replay(path, play=True)
    notices: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: notices.append(message))
    async with app.run_test(size=(160, 48)) as pilot:
        app.feed.go(8)
        began = time.monotonic()
        await settle(pilot, lambda: app.feed.position == 10, "the snapshot after the gap")
        assert time.monotonic() - began < 30  # ×1 would take ten minutes
        assert notices == ["Skipped 10m02s without snapshots (the recorder was not running)."]
        strip = bar_text(app).splitlines()[1]
        assert re.fullmatch(r"[─┃]{3,} {100,}[─┃]{3,}", strip)  # the gap is blank on the strip


async def test_pid_chooses_the_focus_and_the_job_the_advisor_judges(make_replay: MakeReplay, job: Job) -> None:
    path, _ = job
    focused = make_replay(path)
    assert focused.focus_pid == training_scenes.JOB_PID  # the recording's own focus
    app = make_replay(path, pid=training_scenes.JOB_PID + 1, start_time=job[1][40].time)
    async with app.run_test(size=(160, 48)) as pilot:
        await findings_ready(pilot, app)
        assert app.focus_pid == training_scenes.JOB_PID + 1
        assert app.advice == () and max(app.feed.findings.marks) == -1  # type: ignore[union-attr]


async def test_playback_stops_before_its_dashboard_is_taken_down(
    make_replay: MakeReplay, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the app takes the dashboard down widget by widget; playback, which draws into them, stops first. A
    widget slow to go (as on a busy machine) leaves time for several ticks at ×16, none of which may draw into
    the half-removed screen (the error would surface as the app closes)."""
    path, _ = job
    app = make_replay(path, speed=16.0)

    async def slow_to_go(self: Footer) -> None:
        await asyncio.sleep(0.5)

    monkeypatch.setattr(Footer, "on_unmount", slow_to_go, raising=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("space")
        await settle(pilot, lambda: app.feed.position >= 2, "playback moving on")
