"""Recordings that are cut short, have rows that do not decode, or are still being written: the replay opens,
says which in one line, and shows what can be read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gputop.store import Recorder
from gputop.ui.widgets.banner import Banner
from tests.replay.conftest import MakeReplay, findings_ready
from tests.replay.recordings import record
from tests.ui import scenes, training_scenes


def banner_text(app) -> str:  # type: ignore[no-untyped-def]
    return " ".join(app.screen.query_one(Banner).messages)


async def test_a_truncated_recording_shows_what_can_be_read_and_says_it_is_damaged(
    make_replay: MakeReplay, tmp_path: Path
) -> None:
    snaps = scenes.history(training_scenes.starved_job, 400)  # over ten 16 KiB pages
    path = record(tmp_path / "cut.gputop", snaps)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2 + 1000)
    app = make_replay(path)
    readable = len(app.feed.source)
    assert 0 < readable < len(snaps)
    by_time = {s.time: s for s in snaps}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "cut.gputop is damaged" in banner_text(app)
        assert f"showing the {readable} snapshots that can be read" in banner_text(app)
        assert str(tmp_path) not in banner_text(app)  # the file's name, not its whole path
        await pilot.press("dollar_sign")
        assert app.feed.position == readable - 1
        assert app.snapshot == by_time[app.snapshot.time]
        await findings_ready(pilot, app)
        assert app.advice  # the starved job's findings, up to where the file ends


async def test_a_row_that_does_not_decode_is_stepped_over(make_replay: MakeReplay, tmp_path: Path) -> None:
    snaps = scenes.history(training_scenes.starved_job, 20)
    path = record(tmp_path / "bad-row.gputop", snaps)
    db = sqlite3.connect(path)
    db.execute("UPDATE snapshots SET data = x'00112233' WHERE rowid = 6")
    db.commit()
    db.close()
    app = make_replay(path)
    async with app.run_test(size=(120, 40)) as pilot:
        app.feed.go(3)
        await pilot.press("full_stop")
        assert app.feed.position == 4 and app.snapshot == snaps[4]
        await pilot.press("full_stop")  # row 6 is position 5
        assert app.feed.position == 6 and app.snapshot == snaps[6]
        await pilot.press("comma")
        assert app.feed.position == 4 and app.snapshot == snaps[4]
        await findings_ready(pilot, app)
        assert app.feed.findings is not None and app.feed.findings.at(5) == app.feed.findings.at(4)


async def test_a_recording_not_closed_by_its_recorder_says_so(make_replay: MakeReplay, tmp_path: Path) -> None:
    snaps = scenes.history(training_scenes.starved_job, 20)
    path = record(tmp_path / "killed.gputop", snaps, ended=False)
    app = make_replay(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "killed.gputop was not closed by its recorder" in banner_text(app)
        assert "showing the 20 snapshots committed when it was opened" in banner_text(app)
        await pilot.press("dollar_sign")
        assert app.snapshot == snaps[-1]


async def test_a_recording_being_written_replays_what_is_committed(make_replay: MakeReplay, tmp_path: Path) -> None:
    snaps = scenes.history(training_scenes.starved_job, 30)
    path = tmp_path / "live.gputop"
    with Recorder(path, scenes.TICK_S, hostname=scenes.HOSTNAME) as recorder:
        for snap in snaps[:12]:
            recorder.append(snap)
        recorder.flush()
        for snap in snaps[12:]:
            recorder.append(snap)  # not committed yet
        app = make_replay(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert "live.gputop was not closed by its recorder" in banner_text(app)
            await pilot.press("dollar_sign")
            assert app.feed.position == 11 and app.snapshot == snaps[11]
            await findings_ready(pilot, app)
