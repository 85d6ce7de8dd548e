"""The training panel is for training processes: a process that only holds GPU memory (a ``sleep`` here) gets none,
unless the user focused it. Real processes, the real sampler, over the fake driver."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from gputop.advisor import Advisor
from gputop.collect.sampler import Sampler, SnapshotMaker
from gputop.ui.app import GputopApp
from gputop.ui.feed import LiveFeed
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.factories import settle
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import h100
from tests.ui.conftest import TrainingJob

GIB = 1 << 30


def live_app(focus_pid: int | None = None) -> GputopApp:
    sampler = Sampler(0.2, maker_factory=lambda: SnapshotMaker(focus_pid=focus_pid))
    return GputopApp(LiveFeed(sampler, Advisor(focus_pid)), interval_s=0.2, focus_pid=focus_pid, user="alice")


def holder(sleepers: list[subprocess.Popen[bytes]]) -> int:
    """A real process that does nothing: the fake driver says it holds GPU memory."""
    proc = subprocess.Popen(["sleep", "600"])
    sleepers.append(proc)
    return proc.pid


def seen_without_evidence(app: GputopApp, pid: int) -> bool:
    """The sampler has made a training view of ``pid`` and found no training evidence in it."""
    view = None if app.snapshot is None else app.snapshot.training_view(pid)
    return view is not None and not view.trains


def panel(app: GputopApp) -> TrainingPanel:
    return app.screen.query_one(TrainingPanel)


def shown_pid(app: GputopApp) -> int | None:
    shown = panel(app).shown
    return None if shown is None else shown.view.pid


async def test_a_process_that_only_holds_gpu_memory_gets_no_training_panel(
    fake_driver: Callable[..., object], sleepers: list[subprocess.Popen[bytes]]
) -> None:
    pid = holder(sleepers)
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid, 6 * GIB)])]))
    app = live_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: seen_without_evidence(app, pid), "the holder's view")
        table = app.screen.query_one(ProcessTable)
        assert table.selected is not None and table.selected.pid == pid  # the cursor is on it
        assert not panel(app).display
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_the_panel_stays_on_the_training_job_when_the_cursor_moves_onto_a_holder(
    fake_driver: Callable[..., object], sleepers: list[subprocess.Popen[bytes]], training_job: TrainingJob
) -> None:
    pid, job = holder(sleepers), training_job.parent.pid
    processes = [FakeProcess(job, 20 * GIB), FakeProcess(pid, 6 * GIB)]
    fake_driver(FakeState(gpus=[h100(0, processes=processes)]))
    app = live_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: seen_without_evidence(app, pid), "the holder's view")
        await settle(pilot, lambda: shown_pid(app) == job, "the job's panel")
        table = app.screen.query_one(ProcessTable)
        await pilot.press("end")
        await settle(pilot, lambda: table.selected is not None and table.selected.pid == pid, "the cursor on it")
        await pilot.pause(0.5)  # a few ticks with the cursor on the holder
        assert shown_pid(app) == job


async def test_a_focused_process_gets_the_panel_without_training_evidence(
    fake_driver: Callable[..., object], sleepers: list[subprocess.Popen[bytes]]
) -> None:
    pid = holder(sleepers)
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid, 6 * GIB)])]))
    app = live_app(focus_pid=pid)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: seen_without_evidence(app, pid), "the holder's view")
        await settle(pilot, lambda: shown_pid(app) == pid, "the focus's panel")
