"""Two runs compared: each setting and number as A → B with its ratio or its difference in points, each finding
gone, new or still there, the one line a run ends with, and whether two commands run the same job."""

from __future__ import annotations

import json

import pytest

from gputop.compare.changes import compare, job_of, same_job
from gputop.compare.decode import summary_from_json
from gputop.compare.render import comparison_document, render_comparison, since_last_run
from gputop.compare.summary import SETTINGS, FindingSeen, RunSummary

pytestmark = pytest.mark.fast

STARVED = FindingSeen("data-starved", "Input-bound: the loop waits for data", "critical", (("num_workers", 7),))
SLOW_COPY = FindingSeen("pageable-copies", "Copies to the GPU from pageable memory", "warning")


def run(workers: int, samples: float, wait: float, findings=(), **more) -> RunSummary:
    settings = {name: None for name in SETTINGS} | {"num_workers": workers, "batch_size": 16, "pin_memory": False}
    return RunSummary(
        source=f"w{workers}.gputop",
        kind="recording",
        command=f"/venv/bin/python train.py --workers {workers}",
        pid=100 + workers,
        snapshots=20,
        settings=tuple(settings.items()),
        steps_per_s=samples / 16,
        samples_per_s=samples,
        data_wait_share=wait,
        findings=tuple(findings),
        **more,
    )


BEFORE = run(1, 50.0, 0.88, [STARVED, SLOW_COPY], phases_s=(("data", 0.3), ("forward", 0.01)))
AFTER = run(7, 270.0, 0.04, [SLOW_COPY], phases_s=(("data", 0.003), ("forward", 0.01)), mfu=0.2)


def test_a_rate_is_compared_by_its_ratio_and_a_share_by_points():
    comparison = compare(BEFORE, AFTER)

    assert comparison.row("samples/s").ratio == pytest.approx(5.4)
    assert comparison.row("data wait").points == pytest.approx(-84)
    assert comparison.row("data").ratio == pytest.approx(0.01)
    assert (comparison.row("num_workers").a, comparison.row("num_workers").b) == (1, 7)


def test_what_neither_run_knows_is_left_out_and_what_one_knows_is_kept():
    names = {row.name for row in compare(BEFORE, AFTER).rows}

    assert "prefetch_factor" not in names and "J/sample" not in names
    assert "MFU" in names


def test_each_finding_is_gone_still_there_or_new():
    changes = compare(BEFORE, run(7, 270.0, 0.04, [SLOW_COPY, FindingSeen("x", "X", "info")])).findings

    assert [(c.finding.id, c.state) for c in changes] == [
        ("data-starved", "gone"),
        ("pageable-copies", "still"),
        ("x", "new"),
    ]


def test_the_text_shows_each_change_as_a_to_b_and_each_finding_by_its_state():
    text = render_comparison(compare(BEFORE, AFTER))

    lines = [line.split() for line in text.splitlines()]
    assert ["num_workers", "1", "→", "7"] in lines
    assert ["samples/s", "50", "→", "270", "×5.4"] in lines
    assert ["data", "wait", "88%", "→", "4%", "-84", "points"] in lines
    assert "  gone        data-starved: Input-bound: the loop waits for data" in text.splitlines()
    assert "  still there pageable-copies: Copies to the GPU from pageable memory" in text.splitlines()


def test_the_json_document_holds_both_runs_every_change_and_every_finding():
    document = json.loads(json.dumps(comparison_document(compare(BEFORE, AFTER))))

    assert summary_from_json(document["a"]) == BEFORE and summary_from_json(document["b"]) == AFTER
    samples = next(c for c in document["changes"] if c["name"] == "samples/s")
    assert (samples["a"], samples["b"], samples["ratio"]) == (50.0, 270.0, 5.4)
    assert {f["id"]: f["state"] for f in document["findings"]} == {"data-starved": "gone", "pageable-copies": "still"}


def test_the_line_after_a_run_leads_with_the_suggestion_it_followed():
    line = since_last_run(BEFORE, AFTER)

    assert (
        line == "since the last run of this command: num_workers 1 → 7 (suggested): samples/s ×5.4, data wait 88% → 4%"
    )


def test_the_line_after_a_run_says_a_suggestion_not_followed():
    line = since_last_run(BEFORE, run(1, 51.0, 0.87))

    assert line == (
        "since the last run of this command: the last run was told num_workers=7; this one ran with 1: "
        "samples/s ×1.0, data wait 88% → 87%"
    )


def test_the_line_after_a_run_says_another_value_than_the_one_suggested():
    line = since_last_run(BEFORE, run(3, 150.0, 0.5))

    assert line.startswith("since the last run of this command: num_workers 1 → 3 (7 suggested): samples/s ×3.0")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("/venv/bin/python train.py --workers 1", "python3.11 train.py --workers 7"),
        ("python -W ignore train.py", "python train.py --epochs 3"),
        ("torchrun --nproc-per-node 2 train.py --bs 8", "torchrun --nproc-per-node 4 train.py"),
        ("python -m pkg.train --lr 1", "python -m pkg.train"),
    ],
)
def test_runs_of_one_script_with_other_arguments_are_one_job(a, b):
    assert job_of(a) == job_of(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("python train.py", "python eval.py"), ("python -m pkg.train", "python -m pkg.eval"), ("./a.sh", "./b.sh")],
)
def test_runs_of_other_scripts_are_other_jobs(a, b):
    assert not same_job(_with(a), _with(b))


def _with(command: str) -> RunSummary:
    return RunSummary(source="x", kind="report", command=command)
