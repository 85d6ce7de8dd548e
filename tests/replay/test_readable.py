"""Finding the nearest readable snapshot in a recording whose rows do not all decode, in either direction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from gputop.store import open_recording
from gputop.store import rows as rows_module
from gputop.ui.replay.source import ReplaySource
from tests.replay.conftest import MakeReplay
from tests.replay.recordings import record
from tests.ui import scenes, training_scenes

ROWS = 20


def with_bad_rows(path: Path, first: int, last: int) -> Path:
    """A recording of ``ROWS`` snapshots whose positions ``first``..``last`` do not decode, each row a whole
    snapshot (a damaged whole snapshot also loses the rows of changes after it: ``test_damaged.py``)."""
    with mock.patch.object(rows_module, "KEYFRAME_EVERY", 1):
        record(path, scenes.history(training_scenes.starved_job, ROWS))
    db = sqlite3.connect(path)
    db.execute("UPDATE snapshots SET data = x'00112233' WHERE rowid BETWEEN ? AND ?", (first + 1, last + 1))
    db.commit()
    db.close()
    return path


@pytest.fixture
def source(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ReplaySource]:
    first, last = request.param
    with open_recording(with_bad_rows(tmp_path / "bad-rows.gputop", first, last)) as recording:
        yield ReplaySource(recording)


@pytest.mark.parametrize(
    ("source", "position", "direction", "found"),
    [
        ((5, 9), 10, -1, 10),  # readable where it starts
        ((5, 9), 9, -1, 4),  # back over five bad rows
        ((5, 9), 7, 1, 10),  # on over three
        ((5, 9), 7, -1, 4),
        ((0, 7), 2, -1, 8),  # nothing readable before: the nearest one after
        ((0, 7), 7, -1, 8),
        ((0, 7), 0, -1, 8),
        ((12, 19), 15, 1, 11),  # nothing readable after: the nearest one before
        ((12, 19), 19, 1, 11),
    ],
    indirect=["source"],
)
def test_the_nearest_readable_row_is_found_on_either_side(
    source: ReplaySource, position: int, direction: int, found: int
) -> None:
    assert source.readable(position, direction) == found


@pytest.mark.parametrize("source", [(0, ROWS - 1)], indirect=True)
def test_a_recording_with_no_readable_row_has_none(source: ReplaySource) -> None:
    assert source.readable(5, -1) is None
    assert source.readable(5, 1) is None


async def test_skipping_back_into_bad_rows_at_the_start_shows_the_first_readable_snapshot(
    make_replay: MakeReplay, tmp_path: Path
) -> None:
    snaps = scenes.history(training_scenes.starved_job, ROWS)
    app = make_replay(with_bad_rows(tmp_path / "bad-start.gputop", 0, 7))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.feed.position == 8  # the replay starts at the first snapshot that decodes
        app.feed.go(15)
        await pilot.pause()
        assert app.feed.position == 15
        await pilot.press("left_curly_bracket")  # a minute back: before the start, into the rows that do not decode
        await pilot.pause()
        assert app.feed.position == 8 and app.snapshot == snaps[8]
