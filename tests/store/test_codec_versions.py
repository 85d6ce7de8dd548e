"""The snapshot codec's formats: format 3 (process rows and DataLoader workers nest their host process, written as
its PID where it is the same as the snapshot's ``host_processes`` entry) is written; format 2 (every host nested
whole) and format 1 (flat process rows and workers, no ``format`` key), from older recordings and older remote
hosts, still read.

The format-1 files in tests/data/v1 were written by gputop before format 2 (see the README there).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputop.codec import (
    ADDED_LATER,
    FORMAT,
    MAX_SNAPSHOT_BYTES,
    V1_NOT_RECORDED,
    delta_json,
    snapshot_from_delta,
    snapshot_from_json,
    snapshot_json,
)
from gputop.document import WORKER_KEYS, snapshot_to_dict
from gputop.model import MEASURING, NOT_VISIBLE, Gpu, HostProcess, Snapshot, Worker, frozen_reasons
from gputop.store import SCHEMA_VERSION, Recorder, RecordingError, open_recording
from gputop.store.rows import DELTA, KEYFRAME_EVERY, NUMBERS, decode_snapshot, encode_snapshot
from tests.ui import scenes, training_scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

V1 = Path(__file__).resolve().parents[1] / "data" / "v1"
V2 = Path(__file__).resolve().parents[1] / "data" / "v2"
V3 = Path(__file__).resolve().parents[1] / "data" / "v3"
V4 = Path(__file__).resolve().parents[1] / "data" / "v4"
V1_LINE = (V1 / "snapshot.json").read_bytes()
V1_DOCUMENT = json.loads((V1 / "document.json").read_text())
HIDDEN_PID = 777777
"""The fixture's process that the PID namespace cannot see."""


RANK_PID = 4101
"""The fixture's rank 0, whose workers 4200 and 4201 are in its host_processes."""
GONE_WORKER_PID = 4299
"""A worker of rank 0 that the hand-written format-1 view lists but host_processes does not have."""


def v1_snapshot() -> Snapshot:
    return snapshot_from_json(V1_LINE)


def v1_worker(pid: int, worker_id: int | None, **values: object) -> dict[str, object]:
    """A worker as format 1 wrote it (``Worker`` at e386c8f): flat, its host's values beside its own."""
    worker: dict[str, object] = {
        "pid": pid,
        "parent_pid": RANK_PID,
        "worker_id": worker_id,
        "status": "running",
        "cpu_percent": 61.0,
        "rss_bytes": 2147483648,
        "uss_bytes": 310378496,
        "age_s": 1712.0,
        "unavailable": {},
    }
    return {**worker, **values}


def v1_line_with_workers() -> dict[str, Any]:
    """The format-1 fixture with a training view of rank 0, as format 1 encoded ``TrainingView``: worker 4200 is
    in host_processes, ``GONE_WORKER_PID`` is not, and its CPU was still being measured."""
    plain = json.loads(V1_LINE)
    gone = v1_worker(GONE_WORKER_PID, None, cpu_percent=None, uss_bytes=None, age_s=0.4)
    gone["unavailable"] = {"cpu_percent": MEASURING, "uss_bytes": "access denied"}
    plain["training"] = [
        {
            "pid": RANK_PID,
            "role": "training",
            "name": "python",
            "ranks": [],
            "workers": [v1_worker(4200, 0), gone],
            "worker_start_method": "fork",
            "workers_cpu_percent": 61.0,
            "usable_cpu_count": 16,
            "workers_replaced": 0,
            "pin_memory": {
                "state": "off",
                "evidence": "2 workers and no pt_data_pin thread",
                "source": "threads",
                "thread_ids": [],
            },
            "main_thread": {
                "status": "sleeping",
                "wait_channel": "do_sys_poll",
                "cpu_percent": 20.0,
                "busy_share": 0.2,
                "activity": "waiting",
                "unavailable": {},
            },
            "probe": {
                "status": "none",
                "reason": None,
                "age_s": None,
                "rank": None,
                "local_rank": None,
                "world_size": None,
                "torch_version": None,
                "loaders": [],
                "cuda": [],
                "pinned_host": None,
                "cuda_reason": None,
                "failures": 0,
                "last_failure": None,
            },
        }
    ]
    return plain


# -- format 3 ---------------------------------------------------------------------------------------------------


def format_2(plain: dict[str, Any]) -> dict[str, Any]:
    """A format-3 JSON value as format 2 wrote it: every ``host`` written as a PID nested whole."""
    hosts = {h["pid"]: h for h in plain["host_processes"]}
    for row in [*plain["processes"], *(w for view in plain["training"] for w in view["workers"])]:
        if isinstance(row["host"], int):
            row["host"] = dict(hosts[row["host"]])
    return {**plain, "format": 2}


def test_format_3_writes_a_process_rows_host_as_its_pid_and_decodes_to_itself() -> None:
    snap = v1_snapshot()
    plain = json.loads(snapshot_json(snap))
    assert plain["format"] == FORMAT == 3
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
    assert row["host"] == row["pid"]
    assert next(h for h in plain["host_processes"] if h["pid"] == row["pid"])["user"] == "alice"
    back = snapshot_from_json(snapshot_json(snap))
    assert back == snap
    assert back.processes[0].host == back.host_process(back.processes[0].pid)
    zdict = snapshot_json(snap)
    assert decode_snapshot(encode_snapshot(snap, zdict), zdict) == snap


def test_format_3_writes_a_workers_host_as_its_pid_and_decodes_to_itself() -> None:
    snap = snapshot_from_json(json.dumps(v1_line_with_workers()))
    plain = json.loads(snapshot_json(snap))
    worker = plain["training"][0]["workers"][0]
    assert list(worker) == ["host", "worker_id", "uss_bytes", "age_s", "unavailable"]
    assert worker["host"] == 4200
    assert snapshot_from_json(snapshot_json(snap)) == snap
    zdict = snapshot_json(snap)
    assert decode_snapshot(encode_snapshot(snap, zdict), zdict) == snap


def test_format_3_nests_a_host_whole_where_it_differs_from_host_processes() -> None:
    snap = v1_snapshot()
    row = snap.processes[0]
    assert row.host is not None
    changed = dataclasses.replace(snap, processes=(dataclasses.replace(row, host=replace(row.host, rss_bytes=1)),))
    plain = json.loads(snapshot_json(changed))
    assert plain["processes"][0]["host"]["rss_bytes"] == 1
    assert snapshot_from_json(snapshot_json(changed)) == changed


def test_a_format_3_host_pid_missing_from_host_processes_is_a_value_error() -> None:
    plain = json.loads(snapshot_json(v1_snapshot()))
    plain["processes"][0]["host"] = 1
    with pytest.raises(ValueError, match=r"GpuProcess\.host"):
        snapshot_from_json(json.dumps(plain))


def as_sampled(snap: Snapshot) -> Snapshot:
    """``snap`` with each process row's host the snapshot's ``host_processes`` entry of its PID, as the sampler
    makes them (the hand-built scenes give rows a host without parent or thread count)."""
    rows = tuple(dataclasses.replace(p, host=snap.host_process(p.pid) or p.host) for p in snap.processes)
    return dataclasses.replace(snap, processes=rows)


@pytest.mark.parametrize(
    "snap",
    [
        scenes.training_node(lost=[scenes.LOST_GPU_INDEX], focus_pid=scenes.RANK_PIDS[0]),
        as_sampled(scenes.training_node(lost=[scenes.LOST_GPU_INDEX], focus_pid=scenes.RANK_PIDS[0])),
        training_scenes.starved_job(),
    ],
    ids=["training node as built", "training node as sampled", "starved job"],
)
def test_a_scene_round_trips_in_format_3_and_format_2_of_it_still_reads(snap: Snapshot) -> None:
    text = snapshot_json(snap)
    old = json.dumps(format_2(json.loads(text)), separators=(",", ":")).encode()
    assert snapshot_from_json(text) == snapshot_from_json(old) == snap


@pytest.mark.parametrize(
    "snap",
    [as_sampled(scenes.training_node(focus_pid=scenes.RANK_PIDS[0])), training_scenes.starved_job()],
    ids=["training node as sampled", "starved job"],
)
def test_format_3_is_smaller_than_format_2_where_hosts_repeat(snap: Snapshot) -> None:
    text = snapshot_json(snap)
    assert len(text) < len(json.dumps(format_2(json.loads(text)), separators=(",", ":")))


def test_a_scene_with_workers_round_trips_with_each_worker_host_in_host_processes() -> None:
    snap = training_scenes.starved_job()
    assert snap.training[0].workers
    back = snapshot_from_json(snapshot_json(snap))
    assert back == snap
    for worker in back.training[0].workers:
        assert worker.host == back.host_process(worker.pid)


def test_a_format_2_worker_without_its_host_is_a_value_error() -> None:
    plain = json.loads(snapshot_json(training_scenes.starved_job()))
    del plain["training"][0]["workers"][0]["host"]
    with pytest.raises(ValueError, match="Worker"):
        snapshot_from_json(json.dumps(plain))


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
    read on the slow cadence and each process's container (each null, its reason ``not recorded``), the MIG
    keys and the jobs. Every key the older gputop wrote must be there unchanged."""
    assert document.pop("jobs") == []
    for gpu in document["gpus"]:
        for key in ADDED_LATER[Gpu]:
            assert gpu.pop(key) is None
            assert gpu["unavailable"].pop(key) == V1_NOT_RECORDED
        assert (gpu.pop("mig_mode"), gpu.pop("mig_pending_mode"), gpu.pop("mig")) == (None, None, [])
    for row in document["processes"]:
        assert (row.pop("mig_index"), row.pop("gpu_instance_id"), row.pop("compute_instance_id")) == (None,) * 3
        for key in ("container", "pod", "slurm"):
            assert row.pop(key) is None
            assert row["unavailable"].pop(key) == V1_NOT_RECORDED
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


def test_a_format_1_worker_reads_with_its_host_process_from_host_processes() -> None:
    snap = snapshot_from_json(json.dumps(v1_line_with_workers()))
    view = snap.training_view(RANK_PID)
    assert view is not None
    worker = view.workers[0]
    assert worker.pid == 4200 and worker.worker_id == 0
    # Name, user, command, start time and thread count come from the same PID's host_processes entry.
    assert worker.host == snap.host_process(4200)
    assert (worker.host.ppid, worker.host.status, worker.host.cpu_percent) == (RANK_PID, "running", 61.0)
    assert (worker.host.name, worker.host.user, worker.host.num_threads) == ("pt_data_worker", "alice", 3)
    assert (worker.uss_bytes, worker.age_s, dict(worker.unavailable)) == (310378496, 1712.0, {})


def test_a_format_1_worker_without_its_host_process_says_what_was_not_recorded() -> None:
    snap = snapshot_from_json(json.dumps(v1_line_with_workers()))
    view = snap.training_view(RANK_PID)
    assert view is not None and snap.host_process(GONE_WORKER_PID) is None
    gone = view.workers[1]
    assert gone == Worker(
        HostProcess(
            GONE_WORKER_PID,
            RANK_PID,
            status="running",
            rss_bytes=2147483648,
            unavailable=frozen_reasons(
                {
                    "user": V1_NOT_RECORDED,
                    "name": V1_NOT_RECORDED,
                    "command": V1_NOT_RECORDED,
                    "start_time": V1_NOT_RECORDED,
                    "num_threads": V1_NOT_RECORDED,
                    "container": V1_NOT_RECORDED,
                    "pod": V1_NOT_RECORDED,
                    "slurm": V1_NOT_RECORDED,
                    "cpu_percent": MEASURING,
                }
            ),
        ),
        age_s=0.4,
        unavailable=frozen_reasons({"uss_bytes": "access denied"}),
    )


def test_the_json_document_of_a_format_1_worker_keeps_its_flat_keys_and_values() -> None:
    plain = v1_line_with_workers()
    written = plain["training"][0]["workers"]
    doc = snapshot_to_dict(snapshot_from_json(json.dumps(plain)))
    workers = doc["training"][0]["workers"]
    assert [list(w) for w in workers] == [list(WORKER_KEYS)] * 2
    assert workers == written


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


def test_a_format_2_recording_still_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "v2.gputop"
    shutil.copyfile(V2 / "recording.gputop", path)
    with open_recording(path) as recording:
        assert recording.info.schema_version == 2
        snaps = list(recording)
        assert recording.damage is None
    assert [s.time for s in snaps] == [1763900000.0, 1763900001.0, 1763900002.0]
    assert snaps[0] == replace(v1_snapshot(), time=1763900000.0)
    assert snaps[1].training[0].workers
    for snap in snaps:
        assert snapshot_from_json(snapshot_json(snap)) == snap


def test_a_format_3_recording_still_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "v3.gputop"
    shutil.copyfile(V3 / "recording.gputop", path)
    with open_recording(path) as recording:
        assert recording.info.schema_version == 3
        snaps = list(recording)
        assert recording.damage is None
        assert [recording.read(rowid) for rowid, _ in recording.index()] == snaps
    with open_recording(V2 / "recording.gputop") as recording:
        assert snaps == list(recording)
    assert snaps[1].training[0].workers
    for snap in snaps:  # hosts written as a PID are the host_processes entry itself
        for row in snap.processes:
            assert row.host is snap.host_process(row.pid) or row.host != snap.host_process(row.pid)


def test_a_format_4_recording_still_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "v4.gputop"
    shutil.copyfile(V4 / "recording.gputop", path)
    with open_recording(path) as recording:
        assert recording.info.schema_version == 4
        snaps = list(recording)
        assert recording.damage is None
        assert [recording.read(rowid) for rowid, _ in reversed(recording.index())] == snaps[::-1]
    with open_recording(V3 / "recording.gputop") as recording:
        assert snaps == list(recording)


def test_a_new_recording_is_format_5_and_reads_back(tmp_path: Path) -> None:
    snap = v1_snapshot()
    path = tmp_path / "v5.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        recorder.append(snap)
    with open_recording(path) as recording:
        assert recording.info.schema_version == SCHEMA_VERSION == 5
        assert list(recording) == [snap]


# -- formats this gputop does not read, and format-1 rows from someone else ----------------------------------------


@pytest.mark.parametrize("version", [4, 0, "2", True, None, 2.0, [2]])
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


@pytest.mark.parametrize(
    "change",
    [
        lambda w: w.update(pid=[1, 2]),
        lambda w: w.pop("pid"),
        lambda w: w.update(parent_pid="4101"),
        lambda w: w.update(unavailable=["status"]),
        lambda w: w.update(unavailable={"status": 7}),
        lambda w: w.update(cpu_percent=float("inf")),
    ],
    ids=["pid list", "no pid", "parent text", "reasons list", "reason number", "cpu infinite"],
)
def test_a_bad_format_1_worker_is_a_value_error(change) -> None:
    plain = v1_line_with_workers()
    change(plain["training"][0]["workers"][0])
    with pytest.raises(ValueError):
        snapshot_from_json(json.dumps(plain))


def test_format_1_workers_that_are_not_objects_are_a_value_error() -> None:
    for workers in (7, [7], [None]):
        plain = v1_line_with_workers()
        plain["training"][0]["workers"] = workers
        with pytest.raises(ValueError):
            snapshot_from_json(json.dumps(plain))
    plain = v1_line_with_workers()
    plain["training"] = [7]
    with pytest.raises(ValueError, match="TrainingView"):
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


# -- format 4: whole snapshots and the changes from them ---------------------------------------------------------


def changing(n: int) -> list[Snapshot]:
    """``n`` snapshots of the starved job, a process coming and going and numbers changing at every one."""
    snaps = []
    for i in range(n):
        snap = training_scenes.starved_job(1_800_000_000.0 + i)
        if i % 3 == 1:  # a process row that comes and goes, and rows in another order
            snap = dataclasses.replace(snap, processes=snap.processes[::-1][:-1])
        snaps.append(snap)
    return snaps


def test_a_delta_decodes_to_the_snapshot_and_reuses_what_did_not_change() -> None:
    snaps = changing(5)
    for base, snap in itertools.pairwise(snaps):
        text = delta_json(snap, base)
        assert len(text) < len(snapshot_json(snap))
        back = snapshot_from_delta(text, base)
        assert back == snap
        assert back.driver is base.driver  # unchanged parts are the base's own objects
    assert snapshot_from_delta(b"{}", snaps[0]) == snaps[0]


def test_format_5_writes_whole_snapshots_every_keyframe_every_rows_and_reads_every_row(tmp_path: Path) -> None:
    snaps = changing(KEYFRAME_EVERY + 5)
    path = tmp_path / "v5.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        for snap in snaps:
            recorder.append(snap)
    db = sqlite3.connect(path)
    tags = [bytes(data[:1]) for (data,) in db.execute("SELECT data FROM snapshots ORDER BY rowid")]
    db.close()
    assert [i for i, tag in enumerate(tags) if tag not in (DELTA, NUMBERS)] == [0, KEYFRAME_EVERY]
    assert NUMBERS in tags  # rows laid out as the first delta after their whole snapshot hold their numbers alone
    with open_recording(path) as recording:
        assert list(recording) == snaps
        rows = [rowid for rowid, _ in recording.index()]
        for k in [7, 3, KEYFRAME_EVERY + 2, 0, KEYFRAME_EVERY, 4]:  # jumps back and forth
            assert recording.read(rows[k]) == snaps[k]


def test_a_damaged_delta_row_loses_only_itself_and_a_damaged_whole_one_its_deltas(tmp_path: Path) -> None:
    snaps = changing(KEYFRAME_EVERY + 3)
    path = tmp_path / "v4.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        for snap in snaps:
            recorder.append(snap)
    db = sqlite3.connect(path)
    db.execute("UPDATE snapshots SET data = x'00112233' WHERE rowid IN (5, ?)", (KEYFRAME_EVERY + 1,))
    db.commit()
    db.close()
    with open_recording(path) as recording:
        back = list(recording)
        assert recording.skipped == 1 + 3
        assert back == snaps[:4] + snaps[5:KEYFRAME_EVERY]
        assert recording.read(6) == snaps[5]
        with pytest.raises(RecordingError):
            recording.read(KEYFRAME_EVERY + 2)


@pytest.mark.parametrize(
    "delta",
    [
        b"[]",
        b'{"gpus": 3}',
        b'{"gpus": [99]}',
        b'{"gpus": [0, 0]}',
        b'{"gpus": [[0, {"power_w": "hot"}]]}',
        b'{"gpus": [[0, {"power_w": 1e300}]]}',
        b'{"processes": [[0, {"host": 1}]]}',
        b'{"time": -1}',
        b'{"host": {"hostname": "\\u001b[31m"}}',
    ],
)
def test_a_bad_delta_is_a_value_error_or_made_printable(delta: bytes) -> None:
    base = training_scenes.starved_job(1_800_000_000.0)
    try:
        snap = snapshot_from_delta(delta, base)
    except ValueError:
        return
    assert snap.host.hostname.isprintable()
    assert b"hostname" in delta


def test_the_rows_after_a_damaged_first_delta_cannot_be_read_and_are_counted(tmp_path: Path) -> None:
    """Deltas after the first are deflated with its text as well (docs/recording.md): the first is as needed as
    the whole snapshot."""
    snaps = changing(KEYFRAME_EVERY + 2)
    path = tmp_path / "v4.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        for snap in snaps:
            recorder.append(snap)
    db = sqlite3.connect(path)
    db.execute("UPDATE snapshots SET data = x'00112233' WHERE rowid = 2")
    db.commit()
    db.close()
    with open_recording(path) as recording:
        assert list(recording) == [snaps[0], *snaps[KEYFRAME_EVERY:]]
        assert recording.skipped == KEYFRAME_EVERY - 1
        assert recording.read(KEYFRAME_EVERY + 2) == snaps[-1]
        with pytest.raises(RecordingError, match="snapshot row 3 does not decode"):
            recording.read(3)


def test_hostile_delta_rows_are_skipped_one_by_one(tmp_path: Path) -> None:
    """A delta row naming a row that is not its whole snapshot, or no row, or inflating past the limit, or with a
    first byte that is neither, is a row that cannot be read: skipped and counted, the rows around it read."""
    snaps = changing(12)
    path = tmp_path / "v4.gputop"
    with Recorder(path, 1.0, hostname="h") as recorder:
        for snap in snaps:
            recorder.append(snap)
    bomb = zlib.compress(b"{" + b" " * (MAX_SNAPSHOT_BYTES + 10) + b"}", 9)
    db = sqlite3.connect(path)
    good = db.execute("SELECT data FROM snapshots WHERE rowid = 4").fetchone()[0]
    db.executemany(
        "UPDATE snapshots SET data = ? WHERE rowid = ?",
        [
            (DELTA + bytes([1]) + good[2:], 4),  # names row 3, a delta: not its whole snapshot
            (DELTA + bytes([9]) + good[2:], 6),  # names a row before the first
            (DELTA + bytes([5]) + bomb, 7),  # names row 2 (a delta) and inflates to over 16 MiB
            (DELTA, 8),  # no distance
            (b"X" + good[2:], 9),
        ],
    )
    db.commit()
    db.close()
    with open_recording(path) as recording:
        back = list(recording)
        assert recording.skipped == 5
        assert back == [snaps[i] for i in (0, 1, 2, 4, 9, 10, 11)]
        for rowid in (4, 6, 7, 8, 9):
            with pytest.raises(RecordingError, match=f"snapshot row {rowid} does not decode"):
                recording.read(rowid)
        assert recording.read(10) == snaps[9]
