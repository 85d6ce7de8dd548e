"""MIG in the outputs built from a snapshot: the JSON document (additive keys only), the --once table, the
exporter's series."""

from __future__ import annotations

import json

from gputop.document import GPU_KEYS, PROCESS_KEYS, snapshot_to_dict, snapshot_to_json
from gputop.export.metrics import snapshot_families
from gputop.model import NOT_IN_MIG_MODE
from gputop.table import render_text
from tests.ui import scenes
from tests.ui.mig_scenes import ampere_node, mig_node


def test_each_gpu_object_lists_its_instances_after_the_keys_it_had():
    doc = json.loads(snapshot_to_json(mig_node()))
    gpu = doc["gpus"][0]

    assert list(gpu)[: len(GPU_KEYS) + 1] == [*GPU_KEYS, "unavailable"]
    assert (gpu["mig_mode"], gpu["mig_pending_mode"]) == ("enabled", "enabled")
    assert gpu["utilization_gpu_percent"] is None
    assert gpu["unavailable"]["utilization_gpu_percent"] == NOT_IN_MIG_MODE
    assert gpu["mig"][0] == {
        "index": 0,
        "gpu_instance_id": 1,
        "compute_instance_id": 0,
        "profile": "3g.40gb",
        "uuid": "MIG-0a1b2c3d-0000-4000-8000-000000000000",
        "multiprocessor_count": 60,
        "memory_total_bytes": 40 * 1024**3 - 768 * 1024**2,
        "memory_used_bytes": 31 * 1024**3,
        "sm_activity_percent": mig_node().gpus[0].mig[0].sm_activity_percent,
        "tensor_activity_percent": mig_node().gpus[0].mig[0].tensor_activity_percent,
        "unavailable": {},
    }
    assert doc["gpus"][1]["mig"] == [] and doc["gpus"][1]["mig_mode"] is None


def test_each_process_row_carries_its_instance_after_the_keys_it_had():
    rows = snapshot_to_dict(mig_node())["processes"]

    assert list(rows[0])[: len(PROCESS_KEYS) + 1] == [*PROCESS_KEYS, "unavailable"]
    assert [(r["pid"], r["mig_index"], r["gpu_instance_id"], r["compute_instance_id"]) for r in rows] == [
        (4101, 0, 1, 0),
        (5120, 1, 5, 0),
        (5121, 1, 5, 0),
        (4102, None, None, None),
    ]


def test_the_once_table_lists_instances_under_their_gpu_and_a_mig_column():
    text = render_text(mig_node())

    assert "└ MIG 0  3g.40gb  GI 1 CI 0" in text
    assert "tensor" in text and "2 processes" in text
    assert "GPU  MIG         PID" in text
    assert "3g.40gb#1  4101" in text


def test_the_once_table_says_why_a_mig_gpus_memory_and_its_instances_activity_are_na():
    text = render_text(ampere_node())

    assert "  N/A (no permission: root only in MIG mode)  " in text
    assert "SM, tensor: unsupported  1 process" in text
    assert "9.00GiB / 19.8GiB" in text


def test_the_once_table_has_no_mig_column_without_mig():
    text = render_text(scenes.training_node())
    assert "MIG" not in text


def samples(snap):  # type: ignore[no-untyped-def]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in snapshot_families(snap) for s in f.samples}


def test_the_exporter_has_a_series_per_instance_labelled_with_gpu_and_mig():
    found = samples(mig_node())

    labels = (("gpu", "0"), ("gpu_instance", "5"), ("mig", "1"), ("profile", "2g.20gb"))
    labels += (("uuid", "MIG-0a1b2c3d-0000-4000-8000-000000000001"),)
    assert found[("gputop_mig_memory_used_bytes", labels)] == 6 * 1024**3
    assert found[("gputop_mig_memory_total_bytes", labels)] == 20 * 1024**3 - 512 * 1024**2
    assert found[("gputop_mig_sm_activity_ratio", labels)] == 0.095
    assert found[("gputop_mig_tensor_activity_ratio", labels)] == 0.02
    assert found[("gputop_mig_multiprocessors", labels)] == 32
    enabled = [(k, v) for k, v in found.items() if k[0] == "gputop_gpu_mig_enabled"]
    assert [(dict(k[1])["gpu"], v) for k, v in enabled] == [("0", 1)]
    assert not any(k[0] == "gputop_gpu_busy_ratio" and dict(k[1])["gpu"] == "0" for k in found)


def test_no_mig_series_without_mig():
    assert not any(name.startswith(("gputop_mig_", "gputop_gpu_mig")) for name, _ in samples(scenes.training_node()))
