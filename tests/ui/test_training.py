"""The training panel and the advisor's findings in the running dashboard, fed scripted snapshots."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual.widgets import Footer, Static

from gputop.advisor import Advisor, AdvisorConfig
from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.widgets.advice_panel import AdvicePanel
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.ui import scenes
from tests.ui.training_scenes import JOB_PID, OTHER_PID, fed_job, starved_job, stepped_job, two_jobs

MakeApp = Callable[..., GputopApp]


def text(widget: TrainingPanel | AdvicePanel) -> str:
    return "\n".join(strip.text for strip in widget.drawn_lines())


def every(make: Callable[[float], Snapshot], seconds: float, step_s: float = 0.5) -> list[Snapshot]:
    """Snapshots ``step_s`` apart over ``seconds``, ending at ``scenes.T0``."""
    count = int(seconds / step_s) + 1
    return [make(scenes.T0 - (count - 1 - n) * step_s) for n in range(count)]


async def test_a_focused_job_on_a_tall_terminal_gets_the_whole_panel(make_app: MakeApp) -> None:
    app = make_app(scenes.history(starved_job, ticks=20), focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        assert panel.shown is not None and panel.shown.detailed
        shown = text(panel)
        assert "pin_memory=False" in shown
        assert "replaced by new processes 45×" in shown
        assert shown.count("running") == 4
        assert "allocated 21.4GiB" in shown


async def test_at_80x24_the_panel_is_a_summary_of_three_lines(make_app: MakeApp) -> None:
    app = make_app(scenes.history(starved_job, ticks=20), focus_pid=JOB_PID)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        assert panel.region.height == 3
        assert "DATA WAIT" in text(panel)
        assert "4 (fork) 3.8/16 cores" in text(panel)


async def test_the_panel_follows_the_cursor_onto_training_processes_only(make_app: MakeApp) -> None:
    app = make_app([two_jobs()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        table = app.screen.query_one(ProcessTable)
        assert table.selected is not None
        first = table.selected.pid
        assert panel.shown is not None and panel.shown.view.pid == first
        await pilot.press("down")
        await pilot.pause()
        second = table.selected.pid
        assert {first, second} == {JOB_PID, OTHER_PID}
        assert panel.shown.view.pid == second
        await pilot.press("t", "end")  # the tree ends with the DataLoader workers of the job listed last
        await pilot.pause()
        worker = table.selected
        assert worker is not None and worker.is_worker
        owner = next(v.pid for v in app.snapshot.training if any(w.pid == worker.pid for w in v.workers))
        assert panel.shown.view.pid == owner


async def test_the_footer_is_not_rebuilt_while_the_panel_follows_the_cursor(make_app: MakeApp) -> None:
    app = make_app([two_jobs()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        keys = list(footer.children)
        assert any("Training" in str(key.render()) for key in keys)
        panel = app.screen.query_one(TrainingPanel)
        first = panel.shown.view.pid if panel.shown else None
        await pilot.press("down")
        await pilot.pause()
        assert panel.shown is not None and panel.shown.view.pid != first
        # The same keys as before (l among them): the footer's widgets are the ones it had, not made again.
        assert list(footer.children) == keys and all(key.is_attached for key in keys)


async def test_without_training_processes_there_is_no_panel_no_advice_and_no_l(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not app.screen.query_one(TrainingPanel).display
        assert not app.screen.query_one(AdvicePanel).display
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_the_advisor_raises_findings_once_its_window_has_passed(make_app: MakeApp) -> None:
    advisor = Advisor(JOB_PID, AdvisorConfig(window_s=4.0))
    snapshots = every(starved_job, 8.0)
    app = make_app(snapshots[:5], focus_pid=JOB_PID, advisor=advisor)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        advice = app.screen.query_one(AdvicePanel)
        assert not advice.display, "no finding before a whole window"
        for snap in snapshots[5:]:
            app.feed.source.push(snap)  # type: ignore[attr-defined]
        await pilot.pause()
        assert {"data-starved", "pin-memory-off"} <= {a.id for a in app.advice}
        assert advice.display
        assert "WARN  Input-bound" in text(advice)
        assert "→ num_workers=" in text(advice)


async def test_a_healthy_job_shows_no_advice_at_all(make_app: MakeApp) -> None:
    advisor = Advisor(JOB_PID, AdvisorConfig(window_s=4.0))
    app = make_app(every(fed_job, 8.0), focus_pid=JOB_PID, advisor=advisor)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.advice == ()
        assert not app.screen.query_one(AdvicePanel).display
        assert app.screen.query_one(TrainingPanel).display


async def test_l_opens_the_training_screen_a_reaches_the_findings_and_esc_goes_back(make_app: MakeApp) -> None:
    advisor = Advisor(JOB_PID, AdvisorConfig(window_s=4.0))
    app = make_app(every(starved_job, 8.0), focus_pid=JOB_PID, advisor=advisor)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, TrainingScreen)
        findings = app.screen.query_one(AdvicePanel)
        body = app.screen.query_one("#training-body").region
        assert "→ Set num_workers=" in text(findings)
        assert findings.region.y >= body.bottom - 1, "below the panel at 80x24, at most its title showing"
        await pilot.press("a")
        await pilot.pause()
        assert findings.region.y == body.y
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_the_training_screen_says_when_its_process_is_gone(make_app: MakeApp) -> None:
    app = make_app([starved_job(scenes.T0 - 1)], focus_pid=JOB_PID)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        app.feed.source.push(replace(starved_job(), training=()))  # type: ignore[attr-defined]
        await pilot.pause()
        assert not app.screen.query_one(TrainingPanel).display
        assert "no longer a training process" in str(app.screen.query_one("#training-gone", Static).render())


async def test_a_tick_that_changes_some_lines_of_the_panels_shows_every_new_line(make_app: MakeApp) -> None:
    # The panels repaint only the lines that differ: what the screen shows must still be what they draw.
    from gputop.ui.widgets.host_panel import HostPanel

    snapshots = every(starved_job, 10.0)
    app = make_app(snapshots[:-1], focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        host = app.screen.query_one(HostPanel)
        shown_before = text(panel)
        last = snapshots[-1]
        busier = replace(last.host, cpu_percent=(last.host.cpu_percent or 0.0) / 2 + 41.0)
        app.feed.source.push(replace(last, host=busier))  # type: ignore[attr-defined]
        await pilot.pause()
        assert text(panel) != shown_before
        screen = app.screen._compositor.render_strips()
        for widget in (panel, host):
            region = widget.content_region
            on_screen = [screen[y].crop(region.x, region.right).text for y in range(region.y, region.bottom)]
            assert on_screen == [strip.text for strip in widget.drawn_lines()]


async def test_a_job_whose_steps_are_timed_gets_a_step_line_in_the_summary(make_app: MakeApp) -> None:
    app = make_app(scenes.history(stepped_job, ticks=20), focus_pid=JOB_PID)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        assert panel.region.height == 4
        assert "STEP 128 ms  D" in text(panel)
        assert "MFU 9%" in text(panel)


async def test_the_training_screen_has_the_steps_syncs_flops_and_energy(make_app: MakeApp) -> None:
    app = make_app(scenes.history(stepped_job, ticks=20), focus_pid=JOB_PID)
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, TrainingScreen)
        shown = text(app.screen.query_one(TrainingPanel))
        assert "item at train.py:57" in shown
        assert "11.8 TFLOP per step" in shown
        assert "57.3 J per step" in shown
