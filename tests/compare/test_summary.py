"""A run's summary from its snapshots: its training process's settings and numbers over the steady part (start-up
left out), the process chosen where there are several, and the advisor's findings by rule."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.compare.summary import RunTally, findings_seen
from gputop.model import Advice, Launch
from tests.advisor.build import loader, snapshot, step, view

pytestmark = pytest.mark.fast

WINDOW_S = 10.0


def tally_of(*snapshots) -> RunTally:
    tally = RunTally()
    for snap in snapshots:
        tally.add(snap)
    return tally


def test_the_numbers_are_medians_over_the_snapshots_after_the_first_window():
    start_up = [snapshot(t, view(loader(wait=0.99, steps=1.0, workers=1))) for t in range(0, 10)]
    steady = [snapshot(10 + t, view(loader(wait=0.10 + t / 100, steps=20.0 + t, workers=7))) for t in range(5)]

    summary = tally_of(*start_up, *steady).summary("run.gputop", "recording", WINDOW_S, [])

    assert summary is not None
    assert (summary.snapshots, summary.steady) == (5, True)
    assert summary.setting("num_workers") == 7, "the start-up's 1 worker is left out"
    assert summary.steps_per_s == 22.0
    assert summary.samples_per_s == 22.0 * 32
    assert summary.data_wait_share == pytest.approx(0.12)


def test_a_run_shorter_than_the_window_is_summarised_whole_and_says_so():
    summary = tally_of(*[snapshot(t, view(loader(wait=0.5))) for t in range(3)]).summary("r", "run", WINDOW_S, [])

    assert summary is not None and (summary.snapshots, summary.steady) == (3, False)


def test_a_setting_is_the_value_held_in_the_most_snapshots():
    views = [view(loader(batch=64 if t == 12 else 32)) for t in range(10, 15)]

    summary = tally_of(snapshot(0, view()), *[snapshot(t, v) for t, v in zip(range(10, 15), views)]).summary(
        "r", "run", WINDOW_S, []
    )

    assert summary is not None and summary.setting("batch_size") == 32


def test_the_step_phases_are_each_phases_median():
    views = [view(loader(), anatomy=step(data=0.01 * n, forward=0.02)) for n in (1, 2, 3)]

    summary = tally_of(*[snapshot(10 + n, v) for n, v in enumerate(views)]).summary("r", "run", 0.0, [])

    assert summary is not None and summary.phases_s == (("data", 0.02), ("forward", 0.02))


def test_no_training_process_gives_no_summary():
    not_training = view(loader(), evidence=())

    assert tally_of(snapshot(0, not_training)).summary("r", "run", WINDOW_S, []) is None


def test_of_several_ranks_of_a_job_rank_0_is_summarised_and_named():
    ranks = [dataclasses.replace(view(loader(), pid=100 + r), launch=Launch(rank=r, world_size=2)) for r in (1, 0)]
    snap = dataclasses.replace(snapshot(0, ranks[0]), training=tuple(ranks))

    summary = tally_of(snap).summary("r", "run", 0.0, [])

    assert summary is not None and (summary.pid, summary.process_note) == (100, "rank 0 of 2")


def test_each_rule_is_kept_once_with_its_title_and_suggestion():
    def advice(rule: str, pid: int, suggest: dict) -> Advice:
        return Advice(rule, "critical", f"{rule} title", "detail", "action", pid, 0.0, suggest=suggest)

    seen = findings_seen(
        [advice("data-starved", 1, {"num_workers": 7}), advice("data-starved", 2, {}), advice("x", 1, {})]
    )

    assert [(f.id, f.title, f.suggest) for f in seen] == [
        ("data-starved", "data-starved title", (("num_workers", 7),)),
        ("x", "x title", ()),
    ]
