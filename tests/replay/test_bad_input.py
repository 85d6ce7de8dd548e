"""The real ``gputop replay`` command given files it cannot replay, and bad options: one line, no traceback."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.store import SCHEMA_VERSION, Recorder
from tests.replay.recordings import job_snapshots, record
from tests.ui.test_tmux import gputop_command


def replay(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC"}
    return subprocess.run(
        [*gputop_command(), "replay", *map(str, args)], capture_output=True, text=True, timeout=60, env=env
    )


def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("a text file\n" * 100)
    return path


def empty_file(tmp_path: Path) -> Path:
    path = tmp_path / "empty.gputop"
    path.write_bytes(b"")
    return path


def other_database(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    return path


def newer_format(tmp_path: Path) -> Path:
    path = record(tmp_path / "future.gputop", job_snapshots()[:3])
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    return path


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda tmp: tmp / "absent.gputop", "no such file: "),
    "directory": (lambda tmp: tmp, "not a file: "),
    "text": (text_file, "not a gputop recording: "),
    "empty file": (empty_file, "not a gputop recording: "),
    "another database": (other_database, "not a gputop recording: "),
    "newer format": (newer_format, "was written by a newer gputop"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_file_that_cannot_be_replayed_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    make, says = CASES[case]
    done = replay(make(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("gputop: error: ") and says in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_recording_without_snapshots_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "new.gputop"
    Recorder(path, 1.0).close()
    done = replay(path)
    assert done.returncode == 1
    assert done.stderr == "gputop: error: new.gputop has no snapshots yet\n"


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--at", "later"], "--at: not a time: 'later'"),
        (["--at", "03:00"], "--at: 03:00 is not in the recording (2025-11-23 12:10:22 to 12:13:20)"),
        (["--at", "1h"], "--at: 1h is past the end: the recording is 2m58s long"),
        (["--speed", "fast"], "not a speed: 'fast'"),
        (["--speed", "0"], "the speed must be from 0.01 to 1000, got 0"),
        (["--speed", "1e-9"], "the speed must be from 0.01 to 1000, got 1e-9"),
        (["--speed", "1_0"], "not a speed: '1_0'"),
        (["--pid", "-3"], "not a process id"),
    ],
    ids=[
        "at-word",
        "at-outside",
        "at-past-the-end",
        "speed-word",
        "speed-zero",
        "speed-tiny",
        "speed-underscore",
        "pid",
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, option: list[str], says: str) -> None:
    path = record(tmp_path / "job.gputop", job_snapshots())
    done = replay(path, *option)
    assert done.returncode == 2
    assert done.stderr.startswith("gputop: error: ") and says in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
