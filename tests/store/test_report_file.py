"""``gputop report FILE``: the advisor over a whole recording, with when each finding held.

The recordings are real SQLite files written by the real ``Recorder``; the snapshots are the dashboard tests'
scripted training job, starved of data, then well fed, then starved again.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.report import RecordingReport, recording_document, render_recording_report, report_recording
from gputop.advisor.timeline import advise
from gputop.store import SCHEMA_VERSION, Recorder, open_recording
from tests.ui import scenes, training_scenes

T0 = scenes.T0
STARVED_S = (0, 120)
FED_S = (120, 200)
STARVED_AGAIN_S = (200, 260)


def story() -> list:
    """A snapshot a second: starved for two minutes, fed for 80 s, starved for a minute."""
    starved, fed = training_scenes.starved_job, training_scenes.fed_job
    return [
        *(starved(T0 + i) for i in range(*STARVED_S)),
        *(fed(T0 + i) for i in range(*FED_S)),
        *(starved(T0 + i) for i in range(*STARVED_AGAIN_S)),
    ]


def record(path: Path, snapshots: list, close: bool = True) -> Path:
    recorder = Recorder(path, 1.0, hostname="gpu-node-07", flush_every_s=0)
    for snap in snapshots:
        recorder.append(snap)
    if close:
        recorder.close()
    return path


def report_of(path: Path) -> RecordingReport:
    """The advisor over the recording at ``path``, as ``gputop report FILE`` makes it."""
    with open_recording(path) as recording:
        return report_recording(recording, None, AdvisorConfig())


def gputop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args], capture_output=True, text=True, timeout=60, env={"TZ": "UTC"}
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("report") / "story.gputop", story())


def test_the_findings_over_a_recording_are_the_live_advisors(recording):
    live = Advisor(training_scenes.JOB_PID)
    for snap in story():
        live.update(snap)

    report = report_of(recording)

    assert report.pid == training_scenes.JOB_PID, "the recording's focus is the job judged"
    assert [(f.advice, f.active) for f in report.timeline.findings] == list(live.raised())
    assert report.timeline.findings, "the starved job raises findings"


def test_each_finding_held_while_the_job_was_starved_and_cleared_while_it_was_fed(recording):
    report = report_of(recording)
    starved = next(f for f in report.timeline.findings if f.advice.id == "data-starved")

    first, second = starved.spans
    assert T0 + STARVED_S[0] < first.start < T0 + STARVED_S[1], "raised once the window is mostly starved"
    assert T0 + FED_S[0] < first.end < T0 + FED_S[1], "cleared once the window is mostly fed"
    assert second.start > T0 + STARVED_AGAIN_S[0] and second.end is None and starved.active
    assert second.start == starved.advice.since
    held = (first.end - first.start) + (T0 + STARVED_AGAIN_S[1] - 1 - second.start)
    assert starved.held_s(report.last) == pytest.approx(held)


def test_the_timeline_has_the_findings_of_every_snapshot(recording):
    snapshots = story()
    timeline = advise(snapshots, training_scenes.JOB_PID)
    live = Advisor(training_scenes.JOB_PID)

    assert timeline.times == [s.time for s in snapshots]
    assert [timeline.at(i) for i in range(len(snapshots))] == [live.update(s) for s in snapshots]
    assert timeline.index_at(T0 + 130.5) == 130
    assert timeline.index_at(T0 - 10) == 0 and timeline.index_at(T0 + 10_000) == len(snapshots) - 1


def test_report_json_gives_every_finding_with_its_spans(recording):
    done = gputop("report", str(recording), "--json")

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    expected = recording_document(report_of(recording))
    assert document == json.loads(json.dumps(expected))
    assert document["recording"]["hostname"] == "gpu-node-07"
    assert document["recording"]["snapshots"] == len(story())
    assert (document["recording"]["first"], document["recording"]["last"]) == (T0, T0 + 259)
    starved = next(a for a in document["advice"] if a["id"] == "data-starved")
    assert [span["to"] is None for span in starved["held"]] == [False, True]
    assert starved["suggest"] == {"num_workers": starved["suggest"]["num_workers"]} and starved["active"]


def test_report_text_says_when_each_finding_held(recording):
    done = gputop("report", str(recording))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{recording}: 260 snapshots on gpu-node-07, 2025-11-23 12:13:20 to 12:17:39")
    assert lines[1] == f"Advisor over PID {training_scenes.JOB_PID} and the training processes below it"
    held = [line for line in lines if "held" in line and "data-starved" not in line]
    assert any("2 times: 12:1" in line and "–end" in line for line in held), done.stdout


def test_the_pid_option_judges_another_process(recording):
    done = gputop("report", str(recording), "--pid", "999999", "--json")

    assert done.returncode == 0
    assert json.loads(done.stdout)["advice"] == [], "no training process 999999 in the recording"


def test_a_shorter_window_raises_sooner(recording):
    def since(window: str) -> float:
        document = json.loads(gputop("report", str(recording), "--json", "--window", window).stdout)
        return min(a["held"][0]["from"] for a in document["advice"])

    assert since("5") < since("20")


def test_a_recording_without_its_end_mark_is_reported_with_a_note(tmp_path):
    path = tmp_path / "live.gputop"
    recorder = Recorder(path, 1.0, flush_every_s=0)
    try:
        for snap in story()[:40]:
            recorder.append(snap)
        done = gputop("report", str(path))
    finally:
        recorder.close()

    assert done.returncode == 0, done.stderr
    assert "40 snapshots" in done.stdout.splitlines()[0]
    assert "no end mark: it is still being written, or its writer was stopped" in done.stdout


def test_a_truncated_recording_reports_what_it_holds_and_says_so(tmp_path):
    path = record(tmp_path / "cut.gputop", story())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])

    done = gputop("report", str(path), "--json")

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert 0 < document["recording"]["snapshots"] < len(story())
    assert "is damaged" in document["recording"]["damage"]


def test_an_empty_recording_has_no_findings(tmp_path):
    path = record(tmp_path / "empty.gputop", [])

    done = gputop("report", str(path))

    assert done.returncode == 0, done.stderr
    assert "no snapshots" in done.stdout and "No findings" in done.stdout


def newer(tmp_path: Path) -> Path:
    path = record(tmp_path / "newer.gputop", story()[:3])
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: tmp / "missing.gputop", "no such file: "),
        (lambda tmp: tmp, "not a file: "),
        (lambda tmp: (tmp / "notes.txt", (tmp / "notes.txt").write_text("hello"))[0], "not a gputop recording: "),
        (lambda tmp: (tmp / "empty", (tmp / "empty").write_bytes(b""))[0], "not a gputop recording: "),
        (
            newer,
            f"was written by a newer gputop (recording format 99, this gputop reads up to {SCHEMA_VERSION}): "
            "upgrade gputop",
        ),
    ],
    ids=["missing", "directory", "text", "empty-file", "newer-format"],
)
def test_a_file_that_cannot_be_reported_is_one_line_and_exit_2(tmp_path, make, says):
    done = gputop("report", str(make(tmp_path)))

    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("gputop: error: ") and says in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("FILE", "--seconds", "30"), "--seconds is for watching a live job: a recording is reported whole"),
        ((), "gputop report needs --pid PID (a live job) or a recording FILE"),
        (("FILE", "--window", "0"), "must be from 1 to 86400 seconds (a day), got 0"),
    ],
)
def test_bad_arguments_for_a_recording_are_one_line_and_exit_2(recording, args, says):
    done = gputop("report", *(str(recording) if a == "FILE" else a for a in args))

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and says in done.stderr


def test_a_recording_of_one_snapshot_is_reported_as_1_snapshot(tmp_path):
    path = record(tmp_path / "one.gputop", [training_scenes.starved_job(T0)])

    text = render_recording_report(report_of(path))

    assert f"{path}: 1 snapshot on gpu-node-07, " in text


def test_a_recorded_process_without_training_evidence_is_reported_as_not_a_training_process(tmp_path):
    def holder(t: float):
        snap = training_scenes.fed_job(t)
        return replace(snap, training=tuple(replace(v, evidence=()) for v in snap.training))

    path = record(tmp_path / "holder.gputop", [holder(T0 + i) for i in range(30)])

    text = gputop("report", str(path)).stdout.splitlines()
    document = json.loads(gputop("report", str(path), "--json").stdout)

    assert text[3] == (
        f"Not a training process: PID {training_scenes.JOB_PID} showed no training evidence in 30 snapshots, so "
        "only the GPU rules judged it."
    )
    assert text[-1] == "No findings from the GPU rules: nothing held long enough to report."
    process = document["process"]
    assert (process["trains"], process["seen"], process["missing_evidence"][0]) == (False, 30, "probe report")
    assert process["gpus"][0]["memory_bytes"] > 0


def test_a_pid_that_is_in_no_snapshot_is_reported_as_such(recording):
    done = gputop("report", str(recording), "--pid", "999999")

    assert "PID 999999 is in none of the 260 snapshots: there is nothing to judge." in done.stdout.splitlines()
