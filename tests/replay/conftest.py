"""Fixtures for the replay's tests: recordings written by the real ``Recorder``, and replays of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.model import Snapshot
from gputop.store import Recording, open_recording
from gputop.ui.app import GputopApp
from gputop.ui.replay.app import replay_app
from gputop.ui.replay.player import ReplayPlayer
from gputop.ui.replay.source import ReplaySource
from tests.factories import settle
from tests.replay.recordings import job_snapshots, record
from tests.ui.conftest import USER, utc  # noqa: F401  (utc: the clocks on screen read the same everywhere)

MakeReplay = Callable[..., GputopApp]


@pytest.fixture
def job(tmp_path: Path) -> tuple[Path, list[Snapshot]]:
    """A recording of the starved, then fed, training job, and the snapshots written to it."""
    snapshots = job_snapshots()
    return record(tmp_path / "job.gputop", snapshots), snapshots


@pytest.fixture
def make_replay() -> Iterator[MakeReplay]:
    """``make_replay(path, **options)``: a paused replay of the recording at ``path``, run by ``alice``."""
    opened: list[Recording] = []

    def make(path: Path, pid: int | None = None, user: str = USER, **options: object) -> GputopApp:
        recording = open_recording(path)
        opened.append(recording)
        options.setdefault("play", False)
        return replay_app(ReplayPlayer(ReplaySource(recording), **options), pid, user)  # type: ignore[arg-type]

    yield make
    for recording in opened:
        recording.close()


async def findings_ready(pilot, app: GputopApp) -> None:  # type: ignore[no-untyped-def]
    await settle(pilot, lambda: app.feed.findings is not None, "the findings computed")
    await pilot.pause()
