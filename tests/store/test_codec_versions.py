"""The snapshot codec's formats: format 2 (process rows nest their host process) is written, and format 1
(flat process rows, no ``format`` key), from older recordings and older remote hosts, still reads.

The format-1 files in tests/data/v1 were written by gputop before format 2 (see the README there).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gputop.codec import (
    ADDED_LATER,
    FORMAT,
    V1_NOT_RECORDED,
    decode_snapshot,
    encode_snapshot,
    snapshot_from_json,
    snapshot_json,
)
from gputop.document import snapshot_to_dict
from gputop.model import NOT_VISIBLE, Gpu, HostProcess, Snapshot
from gputop.store import SCHEMA_VERSION, Recorder, open_recording
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

V1 = Path(__file__).resolve().parents[1] / "data" / "v1"
V1_LINE = (V1 / "snapshot.json").read_bytes()
V1_DOCUMENT = json.loads((V1 / "document.json").read_text())
HIDDEN_PID = 777777
"""The fixture's process that the PID namespace cannot see."""


def v1_snapshot() -> Snapshot:
    return snapshot_from_json(V1_LINE)


# -- format 2 ---------------------------------------------------------------------------------------------------


def test_format_2_nests_the_host_process_in_each_process_row_and_decodes_to_itself() -> None:
    snap = v1_snapshot()
    plain = json.loads(snapshot_json(snap))
    assert plain["format"] == FORMAT == 2
    row = plain["processes"][0]
    assert set(row) == {
        "pid",
        "gpu_index",
        "kind",
        "gpu_memory_bytes",
        "sm_percent",
        "memory_bandwidth_percent",
        "host",
        "unavailable",
        "mig_index",  # the MIG instance, added within format 2: older readers ignore unknown keys
        "gpu_instance_id",
        "compute_instance_id",
    }
    assert row["host"]["pid"] == row["pid"] and row["host"]["user"] == "alice"
    assert snapshot_from_json(snapshot_json(snap)) == snap
    zdict = snapshot_json(snap)
    assert decode_snapshot(encode_snapshot(snap, zdict), zdict) == snap


def test_a_scene_built_with_host_processes_round_trips() -> None:
    snap = scenes.training_node(lost=[scenes.LOST_GPU_INDEX], focus_pid=scenes.RANK_PIDS[0])
    assert all(p.host is not None and p.host.pid == p.pid for p in snap.processes)
    assert snapshot_from_json(snapshot_json(snap)) == snap


# -- format 1 ---------------------------------------------------------------------------------------------------


def test_a_format_1_line_reads_with_each_row_joined_to_its_host_process() -> None:
    assert b'"format"' not in V1_LINE and b'"host":{' in V1_LINE  # the fixture is format 1 ("host" is HostInfo)
    snap = v1_snapshot()
    assert len(snap.processes) == 11
    for p in snap.processes:
        # The recorder took the row's host side and host_processes from one reading: the join restores that.
        assert p.host is not None and p.host == snap.host_process(p.pid), p.pid
        assert not set(p.unavailable) & {"user", "command", "ppid", "num_threads"}
    rank0 = next(p for p in snap.processes if p.pid == scenes.RANK_PIDS[0])
    assert rank0.host is not None
    assert (rank0.host.user, rank0.host.ppid, rank0.host.num_threads) == ("alice", scenes.TORCHRUN_PID, 40)


def test_a_format_1_process_the_namespace_cannot_see_keeps_none_with_its_reasons() -> None:
    hidden = next(p for p in v1_snapshot().processes if p.pid == HIDDEN_PID)
    assert not hidden.visible and hidden.host is not None
    assert (hidden.host.user, hidden.host.command, hidden.host.ppid) == (None, None, None)
    assert hidden.host.unavailable["command"] == NOT_VISIBLE and hidden.host.unavailable["ppid"] == NOT_VISIBLE
    assert dict(hidden.unavailable) == {
        "sm_percent": "no recent sample",
        "memory_bandwidth_percent": "no recent sample",
    }


def older_keys(document: dict[str, Any]) -> dict[str, Any]:
    """The document less the keys schema 1 gained after format 1, after checking they hold nothing: the GPU keys
    read on the slow cadence (each null, its reason ``not recorded``) and the MIG keys. Every key the older gputop
    wrote must be there unchanged."""
    for gpu in document["gpus"]:
        for key in ADDED_LATER[Gpu]:
            assert gpu.pop(key) is None
            assert gpu["unavailable"].pop(key) == V1_NOT_RECORDED
        assert (gpu.pop("mig_mode"), gpu.pop("mig_pending_mode"), gpu.pop("mig")) == (None, None, [])
    for row in document["processes"]:
        assert (row.pop("mig_index"), row.pop("gpu_instance_id"), row.pop("compute_instance_id")) == (None,) * 3
    return document


def test_the_json_document_of_a_format_1_snapshot_is_the_one_the_older_gputop_wrote() -> None:
    assert older_keys(snapshot_to_dict(v1_snapshot())) == V1_DOCUMENT


def test_a_format_1_row_without_its_host_process_says_what_was_not_recorded() -> None:
    plain = json.loads(V1_LINE)
    plain["host_processes"] = []
    plain["processes"][0]["unavailable"]["ppid"] = "access denied"
    snap = snapshot_from_json(json.dumps(plain))
    host = snap.processes[0].host
    assert host is not None and host.ppid is None and host.num_threads is None
    assert host.unavailable["ppid"] == "access denied"  # the row's own reason, kept
    assert host.unavailable["num_threads"] == V1_NOT_RECORDED
    assert host.user == "alice"


def test_a_format_1_recording_still_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "v1.gputop"
    shutil.copyfile(V1 / "recording.gputop", path)
    with open_recording(path) as recording:
        assert recording.info.schema_version == 1
        snaps = list(recording)
        assert recording.damage is None
    assert [s.time - snaps[0].time for s in snaps] == [0, 1, 2]
    assert snaps[-1] == v1_snapshot()
    assert older_keys(snapshot_to_dict(snaps[-1])) == V1_DOCUMENT


def test_a_new_recording_is_format_2_and_reads_back(tmp_path: Path) -> None:
    snap = v1_snapshot()
    path = tmp_path / "v2.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        recorder.append(snap)
    with open_recording(path) as recording:
        assert recording.info.schema_version == SCHEMA_VERSION == 2
        assert list(recording) == [snap]


# -- formats this gputop does not read, and format-1 rows from someone else ----------------------------------------


@pytest.mark.parametrize("version", [3, 0, "2", True, None, 2.0, [2]])
def test_an_unknown_format_is_a_value_error(version: object) -> None:
    plain = json.loads(snapshot_json(v1_snapshot()))
    plain["format"] = version
    with pytest.raises(ValueError, match="snapshot format"):
        snapshot_from_json(json.dumps(plain))


@pytest.mark.parametrize(
    "change",
    [
        lambda row: row.update(pid=[1, 2]),  # an unhashable PID
        lambda row: row.update(pid={"a": 1}),
        lambda row: row.update(unavailable=["user"]),
        lambda row: row.update(user=7),
        lambda row: row.update(visible="yes"),
        lambda row: row.update(kind="compute+grapics"),
    ],
    ids=["pid list", "pid object", "reasons list", "user number", "visible text", "kind typo"],
)
def test_a_bad_format_1_row_is_a_value_error(change) -> None:
    plain = json.loads(V1_LINE)
    change(plain["processes"][0])
    with pytest.raises(ValueError):
        snapshot_from_json(json.dumps(plain))


def test_format_1_host_processes_that_are_not_objects_do_not_stop_the_row_from_reading() -> None:
    plain = json.loads(V1_LINE)
    plain["host_processes"] = "not a list"
    with pytest.raises(ValueError, match="host_processes"):
        snapshot_from_json(json.dumps(plain))
    plain["host_processes"] = [7, {"pid": [1]}]
    with pytest.raises(ValueError, match="HostProcess"):
        snapshot_from_json(json.dumps(plain))


def test_hostprocess_equality_is_by_value() -> None:  # what the join comparisons above rely on
    assert HostProcess(1, user="a") == HostProcess(1, user="a") != HostProcess(1, user="b")
