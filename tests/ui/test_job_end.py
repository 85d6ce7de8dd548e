"""``gputop run``'s dashboard when its job ends: it says so at once and keeps the job's last view and findings,
marked final; nothing after the end is shown, and the keys that act on live processes and sampling go."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gputop.advisor import Advisor
from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.feed import Ended, LiveFeed
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.widgets.advice_panel import AdvicePanel
from gputop.ui.widgets.banner import Banner
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.factories import settle
from tests.ui import scenes
from tests.ui.scenes import ScriptedSource
from tests.ui.training_scenes import JOB_PID, STARVED_ADVICE, FixedAdvisor, starved_job

MakeApp = Callable[..., GputopApp]
MESSAGE = "Job ended 10:24:03 after 30:12, killed by SIGINT · last view kept · q quits"


def job_app(make_app: MakeApp) -> tuple[GputopApp, list[Snapshot]]:
    snapshots = scenes.history(starved_job, ticks=5)
    return make_app(snapshots, advisor=FixedAdvisor(), focus_pid=JOB_PID), snapshots


def job_row(app: GputopApp) -> str:
    table = app.screen.query_one(ProcessTable)
    return next(" ".join(cells) for cells in map(table.cells_at, range(table.row_count)) if str(JOB_PID) in cells)


def source_of(app: GputopApp) -> ScriptedSource:
    feed = app.feed
    assert isinstance(feed, LiveFeed) and isinstance(feed.source, ScriptedSource)
    return feed.source


async def test_the_end_is_said_at_once_above_the_jobs_last_view(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")

        assert app.screen.query_one(Banner).messages[0] == MESSAGE
        assert app.screen.query_one(StatusBar).view.label == "JOB ENDED"
        assert str(app.screen.query_one(TrainingPanel).border_title).endswith("· probe ok · final ")
        assert app.screen.query_one(AdvicePanel).shown.final
        assert app.screen.query_one(AdvicePanel).shown.advice == STARVED_ADVICE


async def test_nothing_taken_after_the_end_is_shown_and_the_sampling_stops(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        row = job_row(app)
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")
        source_of(app).push(starved_job(snapshots[-1].time + 30))  # the sampler's last, in flight at the end
        await pilot.pause(0.2)

        assert source_of(app).stopped
        assert app.snapshot is snapshots[-1]
        assert job_row(app) == row, "ELAPSED stops with the job"


async def test_a_snapshot_of_the_job_already_gone_gives_way_to_its_last_view(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    gone = scenes.training_node(snapshots[-1].time + 2, focus_pid=JOB_PID)  # no training process any more
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        source_of(app).push(gone)
        await settle(pilot, lambda: app.snapshot is gone)
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")

        assert app.snapshot is snapshots[-1]
        assert app.screen.query_one(TrainingPanel).shown is not None
        assert not any("has exited" in m for m in app.screen.query_one(Banner).messages)


async def test_a_paused_dashboard_shows_the_end_at_once(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        await pilot.press("p")
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")

        assert not app.paused
        assert app.screen.query_one(Banner).messages[0] == MESSAGE


async def test_after_the_end_no_key_pauses_resamples_or_signals(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        assert app.key_allowed("toggle_pause") and app.key_allowed("signal") and app.key_allowed("faster")
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")

        assert not any(app.key_allowed(a) for a in ("toggle_pause", "signal", "faster", "slower"))
        await pilot.press("k")
        assert isinstance(app.screen, DashboardScreen), "no signal dialog"


async def test_the_training_screen_marks_its_view_and_findings_final(make_app: MakeApp) -> None:
    app, snapshots = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, lambda: app.snapshot is snapshots[-1])
        await pilot.press("l")
        await settle(pilot, lambda: isinstance(app.screen, TrainingScreen))
        app.feed.end(Ended(MESSAGE, snapshots[-1]))  # type: ignore[attr-defined]
        await settle(pilot, lambda: app.final is not None, "the end")
        await pilot.pause()

        assert str(app.screen.query_one(TrainingPanel).border_title).endswith(" · final ")
        assert " · final " in str(app.screen.query_one(AdvicePanel).border_title)
        assert app.screen.query_one(StatusBar).view.label == "JOB ENDED"


# -- the feed, without Textual -----------------------------------------------------------------------------------


class Client:
    """The app as the feed sees it."""

    def __init__(self) -> None:
        self.wakes = 0
        self.told: list[Ended] = []

    def wake(self) -> None:
        self.wakes += 1

    def show(self) -> None:
        pass

    def ended(self, ended: Ended) -> None:
        self.told.append(ended)


class SeenAdvisor(Advisor):
    """The advisor, remembering every snapshot it was given."""

    def __init__(self) -> None:
        super().__init__(JOB_PID)
        self.seen: list[Snapshot] = []

    def update(self, snap: Snapshot) -> tuple:  # type: ignore[override]
        self.seen.append(snap)
        return super().update(snap)


def started_feed(snapshots: list[Snapshot]) -> tuple[LiveFeed, ScriptedSource, Client]:
    source = ScriptedSource(snapshots)
    feed = LiveFeed(source, SeenAdvisor())
    client = Client()
    feed.start(client)
    return feed, source, client


@pytest.mark.fast
def test_the_end_wakes_the_ui_thread_which_then_keeps_the_last_view() -> None:
    snapshots = scenes.history(starved_job, ticks=3)
    feed, source, client = started_feed(snapshots)
    assert feed.take() and feed.latest is snapshots[-1]
    wakes = client.wakes

    feed.end(Ended(MESSAGE, snapshots[-2]))

    assert client.wakes == wakes + 1
    assert feed.take()
    assert feed.latest is snapshots[-2] and feed.ended is not None and client.told == [feed.ended]
    assert source.stopped and not feed.signals_allowed and feed.interval_fixed


@pytest.mark.fast
def test_the_last_view_told_before_its_turn_in_the_inbox_is_taken_once() -> None:
    snapshots = scenes.history(starved_job, ticks=3)
    feed, source, _ = started_feed(snapshots[:1])
    feed.take()
    feed.end(Ended(MESSAGE, snapshots[1]))  # the reaping thread read it before the sampler queued it

    assert feed.take() and feed.latest is snapshots[1]
    source.push(snapshots[1])
    source.push(snapshots[2])
    assert not feed.take() and feed.latest is snapshots[1]
    assert feed.advisor.seen == snapshots[:2]  # type: ignore[attr-defined]  # each once, nothing after the end


@pytest.mark.fast
def test_a_job_that_ended_before_any_snapshot_ends_on_the_first_one() -> None:
    source = ScriptedSource()
    feed = LiveFeed(source, Advisor(JOB_PID))
    feed.end(Ended(MESSAGE))  # before the dashboard was up
    client = Client()
    feed.start(client)
    assert client.wakes == 1
    assert not feed.take() and feed.ended is None

    first = starved_job()
    source.push(first)

    assert feed.take() and feed.latest is first and feed.ended is not None
