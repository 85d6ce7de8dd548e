"""``gputop report``: its arguments, its JSON document and its text, on a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gputop.advisor.report import advice_document, advice_to_dict, render_advice
from gputop.advisor.window import DEFAULT_WINDOW_S
from gputop.cli.args import WINDOW_HELP
from gputop.model import CRITICAL, NO_PROCESS, Advice

ADVICE = Advice(
    id="data-starved",
    severity=CRITICAL,
    title="Input-bound: the loop waits for data 71% of each step",
    detail="the loop waits for data 71% of each step at 46.6 steps/s; 2 workers, mostly asleep",
    action="Set num_workers=9 (2 now).",
    pid=4242,
    since=1_800_000_000.0,
    source="both",
    evidence={"data_wait_share": 0.711, "worker_pids": (1, 2)},
    suggest={"num_workers": 9},
)


def gputop(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--pid", "4194304"), "no process with PID 4194304"),
        (("--pid", "999999999"), "not a process id (1 to 4194304): '999999999'"),
        (("--pid", "abc"), "not a process id (1 to 4194304): 'abc'"),
        (("--pid", "1", "--seconds", "0"), "must be a positive number of seconds"),
        (("--pid", "1", "--seconds", "soon"), "not a number of seconds: 'soon'"),
        (("--pid", "1", "--seconds", "5"), "--seconds 5 is shorter than the 20 s a condition must hold"),
        (("--seconds", "30"), "gputop report needs --pid PID (a live job) or a recording FILE"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, says):
    result = gputop("report", *args)

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert says in result.stderr


def test_the_help_names_the_advisors_default_window():
    assert f"(default {DEFAULT_WINDOW_S:g})" in WINDOW_HELP  # spelled out in the CLI, which must start fast


def test_a_process_that_is_no_training_job_gets_no_findings(spawn):
    idle = spawn()

    result = gputop("report", "--pid", str(idle.pid), "--seconds", "1", "--window", "1")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"PID {idle.pid}: watched 1 s")
    assert "No findings" in result.stdout


def test_the_json_document_names_the_pid_and_how_long_it_was_watched(spawn):
    idle = spawn()

    result = gputop("report", "--pid", str(idle.pid), "--seconds", "1", "--window", "1", "--json")

    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["pid"], doc["advice"], doc["ended"]) == (1, idle.pid, [], False)
    assert doc["watched_s"] >= 1


def test_a_process_that_ends_during_the_watch_ends_it(spawn):
    short = spawn("import time; time.sleep(1)")

    result = gputop("report", "--pid", str(short.pid), "--seconds", "20", "--window", "1", "--json")

    doc = json.loads(result.stdout)
    assert doc["ended"] is True
    assert doc["watched_s"] < 10


def test_a_finding_in_json_has_the_documented_keys():
    item = advice_to_dict(ADVICE, active=False)

    assert list(item) == [
        "id",
        "severity",
        "title",
        "detail",
        "evidence",
        "action",
        "suggest",
        "source",
        "pid",
        "pids",
        "job",
        "since",
        "active",
    ]
    assert (item["pids"], item["job"]) == ([ADVICE.pid], None)
    assert item["evidence"]["worker_pids"] == [1, 2]
    assert json.loads(json.dumps(advice_document(4242, [(ADVICE, True)], exit_code=0)))["exit_code"] == 0


def test_a_finding_in_text_leads_with_its_severity_and_id_and_ends_with_the_change():
    text = render_advice([(ADVICE, True), (ADVICE, False)])

    lines = text.splitlines()
    assert lines[0] == "CRITICAL data-starved: Input-bound: the loop waits for data 71% of each step"
    assert lines[2].strip() == "→ Set num_workers=9 (2 now)."
    assert lines[3].strip().startswith("suggest num_workers=9; PID 4242, from both, since ")
    assert lines[4].startswith("CRITICAL data-starved (cleared):")


@pytest.mark.fast
def test_a_finding_about_a_gpu_with_no_process_on_it_names_the_gpu_not_a_pid() -> None:
    idle = Advice(
        "gpu-unhealthy", CRITICAL, "GPU 1 is failing", "", "", pid=NO_PROCESS, since=0.0, evidence={"gpu_index": 1}
    )

    assert "         GPU 1, from external" in render_advice([(idle, True)])
