"""``gputop report A B`` on real runs: two recordings (and the ``--report-json`` documents of the same runs) of a
real CPU training job at two ``num_workers``, compared in a subprocess; and each bad input, refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

JOB = [sys.executable, "-W", "ignore", str(SCRIPTS / "train.py"), "--batches", "40", "--item-s", "0.02"]


def gputop(*args: str, env: dict[str, str] | None = None, timeout_s: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """``w1`` and ``w3``: the same job at 1 then 3 workers, each as a recording and a --report-json document."""
    where = tmp_path_factory.mktemp("runs")
    for workers in (1, 3):
        done = gputop(
            "run",
            "--headless",
            "--no-history",
            "--window",
            "1",
            "--record",
            str(where / f"w{workers}.gputop"),
            "--report-json",
            str(where / f"w{workers}.json"),
            "--",
            *JOB,
            "--workers",
            str(workers),
        )
        assert done.returncode == 0, done.stderr
    return where


def test_two_recordings_of_one_job_show_the_setting_changed_and_each_number_as_a_to_b(runs):
    done = gputop("report", str(runs / "w1.gputop"), str(runs / "w3.gputop"), "--window", "1")

    assert (done.returncode, done.stderr) == (0, "")
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["num_workers", "1", "→", "3"] in lines
    assert ["batch_size", "4", "→", "4", "same"] in lines
    for name in ("steps/s", "samples/s"):
        (row,) = [line for line in lines if line[:1] == [name]]
        assert row[2] == "→" and row[4].startswith("×"), row
    (wait,) = [line for line in lines if line[:2] == ["data", "wait"]]
    assert wait[2].endswith("%") and wait[4].endswith("%") and wait[-1] == "points"
    assert ["Step", "(time", "per", "step)"] in lines and ["Findings"] in lines


def test_the_json_document_holds_both_runs_settings_and_numbers(runs):
    done = gputop("report", str(runs / "w1.gputop"), str(runs / "w3.gputop"), "--window", "1", "--json")

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["a"]["settings"]["num_workers"], document["b"]["settings"]["num_workers"]) == (1, 3)
    assert document["a"]["kind"] == document["b"]["kind"] == "recording"
    samples = next(row for row in document["changes"] if row["name"] == "samples/s")
    assert samples["a"] > 0 and samples["b"] > 0 and samples["ratio"] > 0
    assert all(finding["state"] in ("gone", "new", "still") for finding in document["findings"])


def test_a_recording_is_compared_with_a_report_json_document(runs):
    done = gputop("report", str(runs / "w1.json"), str(runs / "w3.gputop"), "--json")

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["a"]["kind"], document["b"]["kind"]) == ("report", "recording")
    assert (document["a"]["settings"]["num_workers"], document["b"]["settings"]["num_workers"]) == (1, 3)


def refused(*args: str) -> str:
    """The one line ``gputop report ARGS`` says on stderr, with exit status 2."""
    done = gputop("report", *args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gputop: error: "), done.stderr
    return done.stderr.removeprefix("gputop: error: ").rstrip("\n")


def test_a_missing_file_is_refused(runs, tmp_path):
    assert (
        refused(str(tmp_path / "none.gputop"), str(runs / "w3.gputop")) == f"{tmp_path / 'none.gputop'}: no such file"
    )


def test_a_truncated_recording_is_refused(runs, tmp_path):
    cut = tmp_path / "cut.gputop"
    data = (runs / "w1.gputop").read_bytes()
    cut.write_bytes(data[: len(data) // 2])

    said = refused(str(cut), str(runs / "w3.gputop"))

    assert str(cut) in said and "damaged" in said


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"hello": "world"}', "not a gputop run --report-json document"),
        (b'{"schema": 1, "advice": [], "training": [', "not a gputop recording or --report-json document"),
        (b"[" * 200_000, "nested too deeply"),
        (b"\x00\x01 binary", "not a gputop recording or --report-json document"),
    ],
    ids=["foreign", "cut-short", "nested", "binary"],
)
def test_a_document_that_is_not_gputop_s_is_refused(runs, tmp_path, content, says):
    path = tmp_path / "other.json"
    path.write_bytes(content)

    assert says in refused(str(runs / "w1.gputop"), str(path))


def test_a_hostile_document_s_text_reaches_the_terminal_escaped(runs, tmp_path):
    document = json.loads((runs / "w3.json").read_text())
    document["command"] = ["python", "\x1b]0;pwned\x07evil.py"]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document))

    said = refused(str(runs / "w1.json"), str(path))

    assert "\x1b" not in said and "\\x1b]0;pwned\\x07evil.py" in said


def test_a_recording_with_no_training_process_is_refused(runs, tmp_path):
    path = tmp_path / "sleep.gputop"
    assert gputop("run", "--headless", "--no-history", "--record", str(path), "--", "sleep", "1").returncode == 0

    said = refused(str(runs / "w1.gputop"), str(path))

    assert said.startswith(f"{path}: no training process in it")


def test_two_runs_of_different_jobs_are_refused_unless_asked_for(runs, tmp_path):
    document = json.loads((runs / "w3.json").read_text())
    document["command"] = [sys.executable, "eval.py", "--workers", "3"]
    other = tmp_path / "eval.json"
    other.write_text(json.dumps(document))

    said = refused(str(runs / "w1.json"), str(other))

    assert said == (
        f"A and B ran different jobs: python {SCRIPTS / 'train.py'} and python eval.py "
        "(--different-jobs compares them anyway)"
    )
    assert gputop("report", str(runs / "w1.json"), str(other), "--different-jobs").returncode == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--seconds", "5"], "--seconds is for watching a live job: two runs are compared whole"),
        (["--pid", "1"], "--pid picks a process to judge in one recording: two runs compare their training process"),
    ],
)
def test_options_for_one_run_are_usage_errors_with_two(runs, extra, says):
    assert refused(str(runs / "w1.gputop"), str(runs / "w3.gputop"), *extra) == says


def test_a_copy_of_a_recording_compares_as_the_same_run(runs, tmp_path):
    copy = tmp_path / "copy.gputop"
    shutil.copy(runs / "w1.gputop", copy)

    done = gputop("report", str(runs / "w1.gputop"), str(copy), "--json")

    assert done.returncode == 0, done.stderr
    changes = json.loads(done.stdout)["changes"]
    assert changes and not any(row["changed"] for row in changes)
