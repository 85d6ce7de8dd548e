"""Pictures of the replay, compared with the accepted SVGs in ``__snapshots__`` (see tests/ui/test_snapshots.py).

The findings are fixed (``STARVED_ADVICE`` while the job is starved), so rewording a rule does not redraw them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from gputop.advisor.timeline import AdviceTimeline
from gputop.model import Snapshot
from gputop.ui.replay import findings
from tests.replay.conftest import MakeReplay, findings_ready
from tests.ui import training_scenes

SMALL = (80, 24)
LARGE = (160, 48)
SHOWN = 40
"""The position on screen: the job starved, its findings active."""


def fixed_findings(snapshots: Iterable[Snapshot], pid: int | None = None, config: object = None) -> AdviceTimeline:
    timeline = AdviceTimeline()
    for index, snap in enumerate(snapshots):
        starved = snap.training[0].probe.loaders[0].data_wait_share > 0.3
        timeline.times.append(snap.time)
        timeline.active.append(training_scenes.STARVED_ADVICE if starved and index >= 13 else ())
    return timeline


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_replay_of_a_starved_job(
    snap_compare, make_replay: MakeReplay, job: tuple[Path, list[Snapshot]], size: tuple[int, int], monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(findings, "advise", fixed_findings)
    path, snaps = job
    app = make_replay(path, start_time=snaps[SHOWN].time)

    async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
        await findings_ready(pilot, app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=ready)
