"""A run from a ``--report-json`` document, and a kept summary read back: every value checked, text made printable,
anything else refused in one line (``ValueError``)."""

from __future__ import annotations

import copy
import json
import os

import pytest

from gputop.compare.decode import summary_from_json, summary_from_report, summary_to_json
from gputop.compare.summary import RunSummary
from gputop.run import history

pytestmark = pytest.mark.fast

VIEW = {
    "pid": 4242,
    "role": "training",
    "evidence": ["probe report"],
    "probe": {
        "status": "ok",
        "loaders": [
            {
                "last_batch_age_s": 5.0,
                "effective": {"num_workers": 0},
                "requested": {"num_workers": 0},
                "steps_per_s": 1.0,
                "data_wait_share": 0.1,
            },
            {
                "last_batch_age_s": 0.1,
                "effective": {"num_workers": 7, "batch_size": None, "pin_memory": True},
                "requested": {"num_workers": 7, "batch_size": 16},
                "steps_per_s": 10.0,
                "samples_per_s": 160.0,
                "data_wait_share": 0.04,
            },
        ],
        "step": {"steps_per_s": 11.0, "phases_s": [["data", 0.004], ["forward", 0.05]]},
        "cuda": [{"allocated_peak_bytes": 1000}],
    },
    "memory": [{"parts": {"weights": 100, "gradients": 100, "optimizer": 200}}],
    "cost": {"mfu": 0.31, "energy_per_sample_j": 2.5},
}
DOCUMENT = {
    "schema": 1,
    "pid": 4242,
    "command": ["python", "train.py", "--workers", "7"],
    "advice": [{"id": "data-starved", "severity": "warning", "title": "Input-bound", "suggest": {"num_workers": 9}}],
    "training": [VIEW],
}


def test_a_report_gives_its_training_process_s_active_loader_step_memory_cost_and_findings():
    summary = summary_from_report(DOCUMENT, "b.json")

    assert summary is not None
    assert (summary.command, summary.pid, summary.kind) == ("python train.py --workers 7", 4242, "report")
    assert (summary.setting("num_workers"), summary.setting("batch_size"), summary.setting("pin_memory")) == (
        7,
        16,
        True,
    )
    assert (summary.steps_per_s, summary.samples_per_s, summary.data_wait_share) == (11.0, 160.0, 0.04)
    assert summary.phases_s == (("data", 0.004), ("forward", 0.05))
    assert dict(summary.memory) == {"weights": 100, "gradients": 100, "optimizer": 200, "peak": 1000}
    assert (summary.mfu, summary.energy_per_sample_j) == (0.31, 2.5)
    assert summary.suggested == {"num_workers": 9}


def test_a_report_without_a_training_process_gives_no_summary():
    assert summary_from_report({**DOCUMENT, "training": [{**VIEW, "evidence": []}]}, "a.json") is None


def changed(path: str, value: object) -> dict:
    document = copy.deepcopy(DOCUMENT)
    *parents, last = path.split(".")
    target = document
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = value
    return document


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ([1, 2], "not a gputop run --report-json document"),
        ({"schema": 2, "training": [], "advice": []}, "not a gputop run --report-json document"),
        (changed("command", "rm -rf /"), "command is not a list"),
        (changed("training", {"pid": 1}), "training is not a list"),
        (changed("training.0.probe.loaders.1.data_wait_share", 3.0), "data_wait_share is out of range"),
        (changed("training.0.probe.loaders.1.steps_per_s", float("nan")), "steps_per_s is not a number"),
        (changed("training.0.probe.loaders.1.effective.num_workers", -1), "effective.num_workers is not a count"),
        (changed("training.0.probe.loaders.1.effective.num_workers", "7"), "effective.num_workers is not a count"),
        (changed("training.0.probe.step.phases_s", [["data"]]), "step.phases_s is not a list of [phase, seconds]"),
        (changed("training.0.memory.0.parts.weights", 2**70), "parts.weights is not a count"),
        (changed("advice.0.id", "\x1b[2J"), "advice[0].id is not a rule's id"),
        (changed("advice.0.severity", "fatal"), "advice[0].severity is not one of"),
        (changed("advice.0.suggest", {"num_workers": [1]}), "advice[0].suggest.num_workers is not a number"),
        (changed("advice", [DOCUMENT["advice"][0]] * 101), "advice holds over 100 entries"),
    ],
)
def test_a_document_that_is_not_gputop_s_is_refused_in_one_line(document, says):
    with pytest.raises(ValueError, match=None) as refused:
        summary_from_report(document, "a.json")

    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_text_from_a_document_is_made_printable():
    summary = summary_from_report(changed("advice.0.title", "Input\x1b[31m-bound"), "a.json")

    assert summary is not None and summary.findings[0].title == "Input\\x1b[31m-bound"


def test_a_summary_read_back_is_the_summary_kept():
    summary = summary_from_report(DOCUMENT, "b.json")
    assert summary is not None

    assert summary_from_json(json.loads(json.dumps(summary_to_json(summary)))) == summary


# -- the kept summary, in the state directory -------------------------------------------------------------------

COMMAND, CWD = "python train.py --workers 1", "/home/alice/job"
KEPT = RunSummary(source="this run", kind="run", command=COMMAND, pid=5)


def test_the_state_directory_is_xdg_state_home_s_or_the_home_s():
    assert str(history.state_dir({"XDG_STATE_HOME": "/st"})) == "/st/gputop/runs"
    assert history.state_dir({"XDG_STATE_HOME": "relative"}) == history.state_dir({})
    assert str(history.state_dir({})).endswith("/.local/state/gputop/runs")


def test_one_file_per_job_and_directory_whatever_its_arguments():
    assert history.key_of(COMMAND, CWD) == history.key_of("python train.py --workers 7", CWD)
    assert history.key_of(COMMAND, CWD) != history.key_of(COMMAND, "/home/alice/other")
    assert history.key_of(COMMAND, CWD) != history.key_of("python eval.py", CWD)


def test_a_kept_summary_is_private_and_read_back(tmp_path):
    path = tmp_path / "state" / "runs" / history.key_of(COMMAND, CWD)

    history.keep(path, KEPT, COMMAND, CWD)

    assert (os.stat(path).st_mode & 0o777, os.stat(path.parent).st_mode & 0o777) == (0o600, 0o700)
    assert history.recall(path, COMMAND, CWD) == KEPT
    assert history.recall(tmp_path / "none.json", COMMAND, CWD) is None


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "Expecting property name"),
        (
            b'{"format": "gputop-run-summary", "version": 1, "cwd": "/home/alice/job", "job": "python train.py", '
            b'"summary": {"kind": "run", "steady": true, "settings": {}, "phases_s": {}, "memory_bytes": {}, '
            b'"findings": [], "samples_per_s": -5}}',
            "samples_per_s is out of range",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b" " * (history.MAX_BYTES + 1), "over 256 KiB"),
    ],
    ids=["malformed", "out-of-range", "nested", "too-big"],
)
def test_a_kept_summary_that_is_not_one_is_refused(tmp_path, content, says):
    path = tmp_path / "kept.json"
    path.write_bytes(content)
    path.chmod(0o600)

    with pytest.raises(history.Unreadable, match=None) as refused:
        history.recall(path, COMMAND, CWD)

    assert says in str(refused.value)


def test_a_kept_summary_others_may_write_is_not_trusted(tmp_path):
    path = tmp_path / "kept.json"
    path.write_text("{}")
    path.chmod(0o666)

    with pytest.raises(history.Unreadable, match="not a private file of this user's"):
        history.recall(path, COMMAND, CWD)


def test_a_kept_summary_is_never_read_through_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    history.keep(real, KEPT, COMMAND, CWD)
    link = tmp_path / "link.json"
    link.symlink_to(real)

    with pytest.raises(history.Unreadable, match="cannot read"):
        history.recall(link, COMMAND, CWD)
