"""MIG through the snapshot codec: instances and each process's instance round-trip; snapshots written before MIG
(without the keys) decode with no instances and no instance on any process; the strict decoder holds for them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gputop.codec import snapshot_from_json, snapshot_json
from gputop.model import MIG_ENABLED
from gputop.store.rows import decode_snapshot, encode_snapshot
from tests.security.test_snapshot_decoder import check_well_typed, decoded_or_value_error
from tests.ui import scenes
from tests.ui.mig_scenes import mig_node


def test_a_mig_snapshot_round_trips_losslessly() -> None:
    snap = mig_node()
    back = snapshot_from_json(snapshot_json(snap))
    assert back == snap
    assert back.gpus[0].mig_mode == MIG_ENABLED and len(back.gpus[0].mig) == 3
    assert [(p.mig_index, p.gpu_instance_id) for p in back.processes] == [(0, 1), (1, 5), (1, 5), (None, None)]
    check_well_typed(back)
    zdict = snapshot_json(scenes.training_node())
    assert decode_snapshot(encode_snapshot(snap, zdict), zdict) == snap


def test_a_snapshot_from_before_mig_decodes_with_no_instances() -> None:
    plain = json.loads(snapshot_json(mig_node()))
    for gpu in plain["gpus"]:
        for key in ("mig_mode", "mig_pending_mode", "mig"):
            del gpu[key]
    for row in plain["processes"]:
        for key in ("mig_index", "gpu_instance_id", "compute_instance_id"):
            del row[key]

    snap = snapshot_from_json(json.dumps(plain))

    assert all(g.mig == () and g.mig_mode is None for g in snap.gpus)
    assert all(p.mig_index is None and p.gpu_instance_id is None for p in snap.processes)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("gpus", 0, "mig_mode"), "sometimes"),
        (("gpus", 0, "mig"), {"index": 0}),
        (("gpus", 0, "mig", 0, "index"), None),
        (("gpus", 0, "mig", 0, "memory_used_bytes"), -1.5),
        (("gpus", 0, "mig", 0, "sm_activity_percent"), 1e300),
        (("gpus", 0, "mig", 0, "profile"), 7),
        (("processes", 0, "mig_index"), "0"),
    ],
)
def test_a_bad_mig_value_is_a_value_error(path: tuple[object, ...], value: object) -> None:
    tree = json.loads(snapshot_json(mig_node()))
    node: Any = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert decoded_or_value_error(json.dumps(tree)) is None


def test_escapes_in_a_profile_from_elsewhere_are_made_visible() -> None:
    tree = json.loads(snapshot_json(mig_node()))
    tree["gpus"][0]["mig"][0]["profile"] = "3g\x1b[2J.40gb"
    snap = decoded_or_value_error(json.dumps(tree))
    assert snap is not None and "\x1b" not in (snap.gpus[0].mig[0].profile or "")
