"""The job view in a replay: ``j`` on the replay's dashboard opens the recorded job's ranks, the ranks' figures
as recorded at the timeline's position."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from gputop.ui.screens.job import JobScreen
from tests.replay.conftest import MakeReplay
from tests.replay.recordings import record
from tests.ui import scenes
from tests.ui.job_scenes import JOB_ID, RANK_PIDS, torchrun_job


async def test_j_opens_the_recorded_jobs_view_in_a_replay(tmp_path: Path, make_replay: MakeReplay) -> None:
    path = record(tmp_path / "ranks.gputop", scenes.history(torchrun_job, ticks=10))
    app = make_replay(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("j")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobScreen) and screen.job_id == JOB_ID
        table = screen.query_one(DataTable)
        assert [table.get_row_at(n)[1].plain for n in range(table.row_count)] == [str(p) for p in RANK_PIDS]
