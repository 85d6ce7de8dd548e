"""The launcher's identity, the training evidence and the probe's tensor counts survive the codec (recordings,
`stream --full`, the hosts view), and a recording made before the evidence existed gets what its values show."""

from __future__ import annotations

import json

import pytest

from gputop.codec import snapshot_from_json, snapshot_json
from gputop.jobs import find_jobs
from gputop.model import EVIDENCE_PROBE, EVIDENCE_WORKERS
from tests.remote import host_scenes
from tests.ui import scenes, training_scenes

pytestmark = pytest.mark.fast


def test_ranks_with_their_launch_and_evidence_round_trip_and_make_the_same_job():
    snap = host_scenes.ranked(scenes.training_node(), 8, 16, "gpu-node-10", pid_offset=1000)

    back = snapshot_from_json(snapshot_json(snap))

    assert back.training == snap.training
    assert [j.id for j in find_jobs(back)] == [j.id for j in find_jobs(snap)]


def test_the_probes_tensor_counts_round_trip():
    snap = training_scenes.fed_job()
    assert snapshot_from_json(snapshot_json(snap)).training[0].probe.tensors == snap.training[0].probe.tensors


def test_a_view_recorded_before_the_evidence_existed_gets_what_its_values_show():
    plain = json.loads(snapshot_json(training_scenes.starved_job()))
    for view in plain["training"]:
        del view["evidence"]

    (view,) = snapshot_from_json(json.dumps(plain).encode()).training

    assert view.evidence == (EVIDENCE_PROBE, EVIDENCE_WORKERS)


def test_a_hostile_launch_is_refused_by_the_decoder():
    plain = json.loads(snapshot_json(host_scenes.ranked(scenes.training_node(), 0, 16, "gpu-node-07")))
    plain["training"][0]["launch"]["rank"] = "0; rm -rf /"
    with pytest.raises(ValueError, match="rank"):
        snapshot_from_json(json.dumps(plain).encode())
