"""``gputop --pid PID``: one process, its children and workers, and only its GPUs; live, through the real sampler."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from gputop.advisor import Advisor
from gputop.cli import main
from gputop.collect.sampler import Sampler, SnapshotMaker
from gputop.ui.app import GputopApp
from gputop.ui.feed import LiveFeed
from gputop.ui.widgets.banner import Banner
from gputop.ui.widgets.gpu_card import GpuCard
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.process_table import ProcessTable
from tests.factories import settle
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import h100
from tests.ui import scenes
from tests.ui.conftest import TrainingJob

MakeApp = Callable[..., GputopApp]


def live_app(pid: int) -> GputopApp:
    sampler = Sampler(0.2, maker_factory=lambda: SnapshotMaker(focus_pid=pid))
    return GputopApp(LiveFeed(sampler, Advisor(pid)), interval_s=0.2, focus_pid=pid, user="alice")


def rows(app: GputopApp) -> list[str]:
    table = app.screen.query_one(ProcessTable)
    return [" ".join(table.cells_at(i)) for i in range(table.row_count)]


async def test_focus_shows_the_process_its_workers_and_only_its_gpus(
    fake_driver: Callable[..., object], training_job: TrainingJob
) -> None:
    state = FakeState(gpus=[h100(0), h100(1, processes=[FakeProcess(training_job.parent.pid, 6 << 30)])])
    fake_driver(state)
    app = live_app(training_job.parent.pid)
    async with app.run_test(size=(160, 48)) as pilot:
        # A worker takes torch's name for a worker once its loop starts: on a busy machine, after it first shows.
        await settle(pilot, lambda: len(rows(app)) == 3 and all("pt_data_worker" in line for line in rows(app)[1:]))
        await settle(pilot, lambda: [c.index for c in app.screen.query(GpuCard)] == [1])
        lines = rows(app)
        assert str(training_job.parent.pid) in lines[0]
        assert all("pt_data_worker" in line and "DataLoader worker" in line for line in lines[1:])
        assert not app.screen.query_one(Banner).messages


async def test_a_focus_process_without_a_gpu_gets_a_banner_and_its_cpu_side(
    fake_driver: Callable[..., object], training_job: TrainingJob
) -> None:
    fake_driver(FakeState(gpus=[h100(0)]))
    app = live_app(training_job.parent.pid)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: len(rows(app)) == 3)
        banner = app.screen.query_one(Banner)
        assert any("uses no GPU" in m for m in banner.messages)
        assert not app.screen.query_one(GpuPanel).display
        assert "%" in rows(app)[0] or "…" in rows(app)[0]


async def test_a_focus_process_that_exits_says_so(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node(focus_pid=99999)], focus_pid=99999)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "PID 99999 has exited." in app.screen.query_one(Banner).messages


def test_a_missing_pid_is_one_line_and_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert main(["--pid", str(gone.pid)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no process with PID {gone.pid}" in err
