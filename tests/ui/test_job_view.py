"""The job view in the running dashboard: ``j`` opens the job of the selected process, a row per rank with the
straggler marked and the job's findings on top; Enter opens a rank's training screen; ``--job ID`` starts on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual.widgets import DataTable, Static

from gputop.ui.app import GputopApp
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.job import JobScreen
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.widgets.advice_panel import AdvicePanel
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.ui import scenes
from tests.ui.job_scenes import ADVICE, JOB_ID, RANK_PIDS, STRAGGLER_PID, torchrun_job, unprobed_job
from tests.ui.training_scenes import FixedAdvisor

MakeApp = Callable[..., GputopApp]


def job_app(make_app: MakeApp, **options: object) -> GputopApp:
    return make_app(scenes.history(torchrun_job, ticks=5), advisor=FixedAdvisor(ADVICE), **options)


async def open_job(pilot) -> JobScreen:  # type: ignore[no-untyped-def]
    """Press ``j`` on the dashboard: the job view of the selected process (the first rank)."""
    await pilot.pause()
    await pilot.press("j")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, JobScreen)
    return screen


def rows(table: DataTable[object]) -> list[list[str]]:
    return [[getattr(cell, "plain", str(cell)) for cell in table.get_row_at(n)] for n in range(table.row_count)]


def lines(panel: AdvicePanel) -> str:
    return "\n".join(strip.text for strip in panel.drawn_lines())


async def test_j_opens_the_job_with_a_row_per_rank_and_the_straggler_marked(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_job(pilot)
        assert screen.job_id == JOB_ID
        shown = rows(screen.query_one(DataTable))
        assert [row[1] for row in shown] == [str(pid) for pid in RANK_PIDS]
        marked = [row for row in shown if row[-1] == "straggler"]
        assert [row[0] for row in marked] == ["2 ◀"]
        assert [row[5] for row in shown] == ["52%", "49%", "4%", "46%"]  # SYNC WAIT: the others wait for rank 2
        assert "straggler: rank 2" in str(screen.query_one(DataTable).border_title)


async def test_the_jobs_findings_stand_on_top_merged_ones_included(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(160, 48)) as pilot:
        text = lines((await open_job(pilot)).query_one(AdvicePanel))
        assert "Straggler: rank 2 holds the other 3 back" in text
        assert "pin_memory is off in a CUDA job" in text
        assert "PIDs 9101, 9102, 9103, 9104 of job" in text


async def test_enter_opens_the_training_screen_of_the_selected_rank_and_esc_comes_back(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("j", "down", "down", "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TrainingScreen) and screen.pid == STRAGGLER_PID
        shown = screen.query_one(TrainingPanel).shown
        assert shown is not None and shown.view.pid == STRAGGLER_PID
        assert "Straggler" in lines(screen.query_one(AdvicePanel))
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_at_80_columns_the_table_folds_and_keeps_the_waits(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(80, 24)) as pilot:
        table = (await open_job(pilot)).query_one(DataTable)
        titles = [str(column.label).strip() for column in table.ordered_columns]
        assert titles[:6] == ["RANK", "PID", "GPU", "STEPS/S", "DATA WAIT", "SYNC WAIT"]
        assert "WORKERS CPU" not in titles
        assert sum(column.get_render_width(table) for column in table.ordered_columns) <= 80
        assert rows(table)[2][0] == "2 ◀"


async def test_a_job_without_the_probe_says_how_to_get_its_numbers(make_app: MakeApp) -> None:
    app = make_app([unprobed_job()], job_id=JOB_ID)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobScreen)
        assert rows(screen.query_one(DataTable))[0][3] == "N/A"  # STEPS/S
        note = screen.query_one("#job-note", Static)
        assert note.display and note.region.height >= 1
        assert "No probe report from this job" in str(note.render())
        assert "gputop run" in str(note.render())


async def test_a_job_with_the_probe_has_no_hint(make_app: MakeApp) -> None:
    app = job_app(make_app, job_id=JOB_ID)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.screen.query_one("#job-note", Static).display


async def test_without_any_job_j_gives_a_notice_and_stays(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert any("No training job" in str(n.message) for n in app._notifications)


async def test_a_job_not_there_yet_is_waited_for_and_shown_once_it_comes(make_app: MakeApp) -> None:
    before = replace(torchrun_job(), training=())
    app = make_app([before], advisor=FixedAdvisor(ADVICE), job_id=JOB_ID)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobScreen)
        note = screen.query_one("#job-gone", Static)
        assert note.display and f"No job {JOB_ID}" in str(note.render())
        app.paused = True
        app.snapshot = torchrun_job()
        await pilot.pause()
        assert not note.display
        assert screen.query_one(DataTable).row_count == 4


async def test_the_job_view_says_when_its_job_is_gone(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_job(pilot)
        app.paused = True
        app.snapshot = replace(torchrun_job(), training=(), processes=())
        await pilot.pause()
        note = screen.query_one("#job-gone", Static)
        assert note.display and "no longer among the training processes" in str(note.render())


async def test_the_key_help_lists_the_job_view(make_app: MakeApp) -> None:
    app = job_app(make_app)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        keys = dict(app.key_help())
        assert "j" in keys and "job" in keys["j"].lower()
