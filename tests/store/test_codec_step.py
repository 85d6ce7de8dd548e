"""The step's anatomy, its cost (energy per step, MFU) and each GPU's energy counter in the snapshot codec: they
round-trip whole and as changes, a recording keeps them, recordings made before them read as not recorded, and
values no gputop writes are refused or dropped as the decoder does everywhere."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from gputop.codec import V1_NOT_RECORDED, delta_json, snapshot_from_delta, snapshot_from_json, snapshot_json
from gputop.document import snapshot_to_dict
from gputop.model import INVALID_VALUE, Snapshot, StepCost
from gputop.store import Recorder, open_recording
from tests.security.test_step_reports import STEP_ANATOMY
from tests.ui import training_scenes

pytestmark = pytest.mark.fast

V3 = Path(__file__).resolve().parents[1] / "data" / "v3"
STEP = STEP_ANATOMY
COST = StepCost(
    energy_per_step_j=5.5,
    energy_per_sample_j=0.17,
    power_w=259.0,
    achieved_tflops=74.6,
    peak_tflops=989.4,
    peak_source="NVIDIA H100 Tensor Core GPU datasheet",
    precision="bf16",
    mfu=0.0754,
    unavailable={},
)


def with_step(snap: Snapshot, **cost: object) -> Snapshot:
    view = snap.training[0]
    loader = dataclasses.replace(view.probe.loaders[0], created_at="train.py:41")
    probe = dataclasses.replace(view.probe, step=STEP, loaders=(loader,))
    view = dataclasses.replace(view, probe=probe, cost=dataclasses.replace(COST, **cost))
    gpus = tuple(dataclasses.replace(g, energy_j=15636.002 + g.index) for g in snap.gpus)
    return dataclasses.replace(snap, training=(view, *snap.training[1:]), gpus=gpus)


def test_a_step_its_cost_and_the_energy_counters_round_trip() -> None:
    snap = with_step(training_scenes.starved_job())

    assert snapshot_from_json(snapshot_json(snap)) == snap


def test_they_round_trip_as_changes_from_a_snapshot_without_them() -> None:
    base = training_scenes.starved_job()
    snap = with_step(training_scenes.starved_job(base.time + 1))

    assert snapshot_from_delta(delta_json(snap, base), base) == snap


def test_a_recording_keeps_them(tmp_path: Path) -> None:
    snap = with_step(training_scenes.starved_job())
    path = tmp_path / "step.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        recorder.append(snap)

    with open_recording(path) as recording:
        assert list(recording) == [snap]


def test_a_recording_made_before_them_reads_with_each_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "v3.gputop"
    shutil.copyfile(V3 / "recording.gputop", path)

    with open_recording(path) as recording:
        snaps = list(recording)

    assert snaps and all(g.energy_j is None for s in snaps for g in s.gpus)
    assert all(g.unavailable["energy_j"] == V1_NOT_RECORDED for s in snaps for g in s.gpus)
    views = [v for s in snaps for v in s.training]
    loaders = [loader for v in views for loader in v.probe.loaders]
    assert views and loaders
    assert all((v.cost, v.probe.step, v.probe.step_reason) == (None, None, None) for v in views)
    assert all((loader.created_at, loader.unavailable["created_at"]) == (None, V1_NOT_RECORDED) for loader in loaders)


def test_the_json_document_carries_them() -> None:
    snap = with_step(training_scenes.starved_job())

    document = json.loads(json.dumps(snapshot_to_dict(snap)))

    assert document["gpus"][0]["energy_j"] == 15636.002
    view = document["training"][0]
    assert view["probe"]["step"]["phases_s"][1] == ["forward", 0.0063]
    assert view["probe"]["step"]["sync_sites"] == [{"site": "train.py:57", "call": "item", "per_step": 1.0}]
    assert view["probe"]["loaders"][0]["created_at"] == "train.py:41"
    assert (view["cost"]["mfu"], view["cost"]["energy_per_step_j"]) == (0.0754, 5.5)


def plain_with(path: tuple[object, ...], value: object) -> bytes:
    plain = json.loads(snapshot_json(with_step(training_scenes.starved_job())))
    *way, last = path
    holder = plain
    for key in way:
        holder = holder[key]
    holder[last] = value
    return json.dumps(plain).encode()


STEP_PATH = ("training", 0, "probe", "step")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ((*STEP_PATH, "sync_sites", 0, "site"), "train.py", "SyncSite.site: not of the form"),
        ((*STEP_PATH, "sync_sites", 0, "call"), "it\x1b[2Jem", "SyncSite.call: not of the form"),
        ((*STEP_PATH, "sync_sites", 0, "per_step"), -1.0, "out of range"),
        ((*STEP_PATH, "phases_s", 0), ["compile", 0.1], "expected one of backward"),
        ((*STEP_PATH, "phases_s", 0), ["data", -0.1], "out of range"),
        ((*STEP_PATH, "step_s"), -0.0164, "StepAnatomy.step_s"),
        ((*STEP_PATH, "h2d_pageable_share"), 2.0, "StepAnatomy.h2d_pageable_share"),
        ((*STEP_PATH, "boundary"), "epoch", "StepAnatomy.boundary"),
        (("training", 0, "probe", "loaders", 0, "created_at"), "train.py:41 rm -rf", "LoaderView.created_at"),
        (("training", 0, "cost", "precision"), "x" * 100, "StepCost.precision: over 16 characters"),
    ],
)
def test_a_step_no_gputop_wrote_is_refused(path: tuple[object, ...], value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        snapshot_from_json(plain_with(path, value))


@pytest.mark.parametrize(("name", "value"), [("mfu", 40.0), ("mfu", -0.1), ("power_w", -5.0)])
def test_a_cost_out_of_range_is_none_with_its_reason(name: str, value: float) -> None:
    snap = snapshot_from_json(plain_with(("training", 0, "cost", name), value))

    cost = snap.training[0].cost
    assert cost is not None and getattr(cost, name) is None
    assert cost.unavailable[name] == INVALID_VALUE


@pytest.mark.parametrize("value", [-1.0, 1e14])
def test_an_energy_counter_out_of_range_is_none_with_its_reason(value: float) -> None:
    snap = snapshot_from_json(plain_with(("gpus", 0, "energy_j"), value))

    assert (snap.gpus[0].energy_j, snap.gpus[0].unavailable["energy_j"]) == (None, INVALID_VALUE)
