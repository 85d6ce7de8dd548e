"""Counts on screen say one thing in the singular: ``1 thread``, ``1 worker``, ``of 1 core``, never ``1 threads``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from rich.text import Text

from gputop.model import Snapshot, TrainingView
from gputop.run.status import status_line
from gputop.store import open_recording
from gputop.ui.app import GputopApp
from gputop.ui.replay.source import ReplaySource, recording_notices
from gputop.ui.screens.detail import detail_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.text.training import TrainingSparks, panel_lines
from gputop.ui.widgets.host_panel import HostPanel
from tests.replay.recordings import record
from tests.ui import scenes
from tests.ui.training_scenes import starved_job

MakeApp = Callable[..., GputopApp]
P = Palette()


def plain(lines: list) -> str:  # type: ignore[type-arg]
    return "\n".join(line.plain for line in lines if isinstance(line, Text))


def one_worker_on_one_core() -> TrainingView:
    view = starved_job().training[0]
    loader = replace(view.probe.loaders[0], batches=1)
    probe = replace(view.probe, loaders=(loader,))
    return replace(view, workers=view.workers[:1], usable_cpu_count=1, probe=probe)


@pytest.mark.fast
def test_the_detail_screen_counts_1_thread() -> None:
    snap = scenes.training_node()
    pid = scenes.RANK_PIDS[0]
    hosts = tuple(replace(h, num_threads=1) if h.pid == pid else h for h in snap.host_processes)
    snap = replace(snap, host_processes=hosts)

    assert "   1 thread   " in plain(detail_lines(snap, pid, None, 120, P))


@pytest.mark.fast
def test_the_training_panel_counts_1_core_and_1_batch() -> None:
    shown = plain(panel_lines(one_worker_on_one_core(), TrainingSparks(), {}, 160, P))

    assert " of 1 core" in shown and "1 cores" not in shown
    assert "· 1 batch" in shown


@pytest.mark.fast
def test_the_headless_status_line_counts_1_worker_on_1_core() -> None:
    line = status_line([one_worker_on_one_core()], 60.0)

    assert "1 worker (fork)" in line
    assert "/1 core" in line and "1 cores" not in line


async def test_the_host_line_of_a_one_cpu_machine_counts_1_cpu(make_app: MakeApp) -> None:
    def one_cpu(t: float) -> Snapshot:
        snap = scenes.training_node(t)
        host = replace(snap.host, cpu_count=1, usable_cpu_count=1, cpu_percent_per_core=(50.0,))
        return replace(snap, host=host)

    app = make_app(scenes.history(one_cpu, ticks=3))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        line = app.screen.query_one(HostPanel).drawn_lines()[0].text

    assert " of 1 CPU " in line


def test_a_replay_of_one_snapshot_not_closed_counts_1_snapshot(tmp_path: Path) -> None:
    path = record(tmp_path / "one.gputop", [scenes.training_node()], ended=False)

    with open_recording(path) as recording:
        notices = recording_notices(ReplaySource(recording))

    assert notices[-1].endswith("showing the 1 snapshot committed when it was opened")
