"""``gputop run`` remembers the last run of a command: at the end of the next run of the same job it says in one
line what changed and what it gave; the summary is kept private in the state directory, and a kept file that is
not one never fails the run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

JOB = [sys.executable, "-W", "ignore", str(SCRIPTS / "train.py"), "--batches", "30", "--item-s", "0.02"]
SINCE = "gputop: since the last run of this command: "


def run(state: Path, workers: int, *options: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop",
            "run",
            "--headless",
            "--window",
            "1",
            *options,
            "--",
            *JOB,
            "--workers",
            str(workers),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "XDG_STATE_HOME": str(state)},
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A first run of the job with one worker, and the state directory it left: each test that goes on from there
    takes a copy (a run of the job is a torch start and seconds of training)."""
    state = tmp_path_factory.mktemp("history") / "state"
    return state, run(state, 1)


def after_the_first_run(first_run: tuple[Path, subprocess.CompletedProcess], tmp_path: Path) -> Path:
    """A state directory as the first run left it, this test's own."""
    state = tmp_path / "state"
    shutil.copytree(first_run[0], state)
    return state


def test_the_second_run_of_a_job_says_what_changed_since_the_first(first_run, tmp_path):
    state = after_the_first_run(first_run, tmp_path)
    first = first_run[1]

    second = run(state, 2)

    assert SINCE not in first.stderr
    (line,) = [line for line in second.stderr.splitlines() if line.startswith(SINCE)]
    assert re.fullmatch(
        r"num_workers 1 → 2( \(suggested\)| \(\d+ suggested\))?: samples/s ×[0-9.]+, data wait \d+% → \d+%",
        line.removeprefix(SINCE),
    ), line
    for runs in (first_run[0], state):  # as the first run made them, and as the second left them
        (kept,) = (runs / "gputop" / "runs").iterdir()
        assert (kept.stat().st_mode & 0o777, kept.parent.stat().st_mode & 0o777) == (0o600, 0o700)


def test_no_history_neither_says_nor_keeps(tmp_path):
    state = tmp_path / "state"

    run(state, 1, "--no-history")

    assert not state.exists()


def test_a_kept_file_that_is_not_a_summary_is_said_and_replaced_and_the_run_goes_on(first_run, tmp_path):
    state = after_the_first_run(first_run, tmp_path)
    (kept,) = (state / "gputop" / "runs").iterdir()
    kept.write_text('{"format": "gputop-run-summary", "version": 1, "cwd": "\\u001b[2J"')

    again = run(state, 1)

    assert SINCE not in again.stderr
    assert f"gputop: the last run's summary was left out: {kept}: " in again.stderr
    assert "\x1b" not in again.stderr
    assert SINCE in run(state, 1).stderr, "the bad file was replaced by this run's summary"
