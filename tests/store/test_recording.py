"""The recording file: lossless round trips, batched commits, and every kind of bad input to the reader."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from types import MappingProxyType
from typing import Any

import pytest

from gputop import __version__
from gputop.collect.sampler import SnapshotMaker
from gputop.model import (
    DRIVER_OK,
    GPU_LOST_STATE,
    MEASURING,
    NOT_VISIBLE,
    PIN_ON,
    PROBE_OK,
    UNSUPPORTED,
    CudaMemory,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostInfo,
    HostProcess,
    LoaderConfig,
    LoaderView,
    MainThread,
    PinMemoryStatus,
    PinnedHostMemory,
    ProbeReport,
    Snapshot,
    TrainingView,
    Worker,
    frozen_reasons,
)
from gputop.store import SCHEMA_VERSION, Recorder, RecordingError, open_recording
from gputop.store.rows import decode_snapshot, encode_snapshot
from tests.factories import host_info
from tests.machines import training_box

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def host(**overrides: Any) -> HostInfo:
    values: dict[str, Any] = {
        "per_core": (10.0, 15.0, 0.0, 100.0),
        "cpu_percent": 12.5,
        "load_average": (1.5, 1.25, 0.75),
        "used_gib": 12,
        "available_gib": 50,
    }
    return host_info("trainer-7", **{**values, **overrides})


def training_snapshot(t: float = 1_700_000_000.25) -> Snapshot:
    """A hand-built snapshot using every model class, with None-and-reason fields everywhere."""
    loader = LoaderView(
        loader_id=1,
        requested=LoaderConfig(batch_size=64, num_workers=8, pin_memory=True, timeout_s=0.0),
        effective=LoaderConfig(batch_size=64, num_workers=8, pin_memory=False, start_method="fork"),
        worker_pids=(201, 202),
        passes=3,
        batches=1200,
        window_s=10.0,
        window_batches=41,
        data_wait_share=0.625,
        steps_per_s=4.1,
        samples_per_s=262.4,
        waiting_now_s=None,
        last_batch_age_s=0.03,
        unavailable=frozen_reasons({"pass_start_s": MEASURING}),
    )
    view = TrainingView(
        pid=200,
        name="python",
        ranks=(300, 301),
        workers=(
            Worker(HostProcess(201, 200, status="sleeping", cpu_percent=99.5, rss_bytes=10**9), worker_id=0),
            Worker(HostProcess(202, 200, unavailable=frozen_reasons({"cpu_percent": MEASURING}))),
        ),
        worker_start_method="fork",
        workers_cpu_percent=99.5,
        usable_cpu_count=16,
        workers_replaced=2,
        pin_memory=PinMemoryStatus(state=PIN_ON, evidence="thread pt_data_pin", source="threads", thread_ids=(205,)),
        main_thread=MainThread(status="sleeping", wait_channel="futex_wait_queue", cpu_percent=3.0, busy_share=0.1),
        probe=ProbeReport(
            status=PROBE_OK,
            age_s=0.4,
            rank=0,
            local_rank=0,
            world_size=2,
            torch_version="2.4.0",
            loaders=(loader,),
            cuda=(CudaMemory(device=0, uuid="GPU-x", gpu_index=0, allocated_bytes=5, num_ooms=0),),
            pinned_host=PinnedHostMemory(allocated_bytes=1 << 20),
            failures=1,
            last_failure="OSError: disk full",
        ),
    )
    return Snapshot(
        time=t,
        host=host(load_average=None, cpu_percent=None),
        driver=DriverInfo(status=DRIVER_OK, driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550"),
        gpus=(
            Gpu(
                index=0,
                uuid="GPU-a",
                name="NVIDIA H100 80GB HBM3",
                memory_total_bytes=80 * 1024**3,
                utilization_gpu_percent=87,
                temperature_c=61.0,
                power_w=512.345,
                throttle_reasons=("sw_power_cap",),
                fan_percent=None,
                unavailable=frozen_reasons({"fan_percent": UNSUPPORTED}),
            ),
            Gpu(
                index=1,
                uuid=None,
                name=None,
                state=GPU_LOST_STATE,
                reason="GPU is lost (fell off the bus): it needs a reset or a reboot",
                throttle_reasons=(),
            ),
        ),
        processes=(
            GpuProcess(
                pid=200,
                gpu_index=0,
                kind="compute",
                gpu_memory_bytes=6 * 1024**3,
                host=HostProcess(pid=200, command="python t.py"),
            ),
            GpuProcess(
                pid=999,
                gpu_index=0,
                kind="compute",
                unavailable=frozen_reasons({"user": NOT_VISIBLE}),
                host=HostProcess(pid=999, visible=False),
            ),
        ),
        host_processes=(HostProcess(pid=200, ppid=1, name="python", num_threads=12),),
        focus_pid=200,
        notices=("1 GPU process not visible from this PID namespace",),
        training=(view, TrainingView(pid=300)),
    )


def assert_same_types(a: object, b: object) -> None:
    """Equal with == is not enough: tuples stay tuples, ints ints, floats floats, reasons read-only mappings."""
    assert type(a) is type(b), (a, b)
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same_types(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            assert_same_types(x, y)
    elif isinstance(a, MappingProxyType):
        assert dict(a) == dict(b)


def test_hand_built_snapshot_round_trips_exactly():
    snap = training_snapshot()

    back = decode_snapshot(encode_snapshot(snap))

    assert back == snap
    assert_same_types(back, snap)
    assert back.gpus[0].unavailable["fan_percent"] == UNSUPPORTED
    assert back.training[0].probe.loaders[0].unavailable == {"pass_start_s": MEASURING}
    assert back.host.load_average is None


def test_snapshot_from_the_fake_driver_and_real_processes_round_trips(fake_driver, spawn, tmp_path):
    procs = [spawn(), spawn()]
    fake_driver(training_box(2, [p.pid for p in procs]))
    maker = SnapshotMaker()
    try:
        first = maker.snapshot()
        second = maker.one_shot()
    finally:
        maker.close()
    assert len(second.processes) == 2 and second.host_processes

    with Recorder(tmp_path / "run.gputop", 1.0, flush_every_s=0) as rec:
        rec.append(first)
        rec.append(second)
        rec.append(training_snapshot(second.time + 1))
    with open_recording(tmp_path / "run.gputop") as recording:
        back = list(recording)
        info = recording.info

    assert back == [first, second, training_snapshot(second.time + 1)]
    for a, b in zip(back, [first, second], strict=False):
        assert_same_types(a, b)
    assert (info.schema_version, info.gputop_version, info.interval_s) == (SCHEMA_VERSION, __version__, 1.0)
    assert info.hostname and info.started
    assert recording.damage is None


def test_the_advisors_window_of_the_run_that_recorded_is_read_back(tmp_path):
    with Recorder(tmp_path / "run.gputop", 0.375, window_s=3.0, flush_every_s=0) as rec:
        rec.append(training_snapshot(5.0))
    with Recorder(tmp_path / "plain.gputop", 1.0, flush_every_s=0) as rec:
        rec.append(training_snapshot(5.0))

    with open_recording(tmp_path / "run.gputop") as run, open_recording(tmp_path / "plain.gputop") as plain:
        assert (run.info.window_s, plain.info.window_s) == (3.0, None)


def test_the_file_is_sqlite_in_wal_mode_with_the_documented_tables(tmp_path):
    path = tmp_path / "r.gputop"
    with Recorder(path, 0.5, hostname="h", started=100.0) as rec:
        rec.append(training_snapshot(5.0))
        rec.flush()
        writing = sqlite3.connect(path)
        assert writing.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        writing.close()

    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.gputop"], "a finished recording is one file"
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["format"] == '"gputop-recording"' and meta["hostname"] == '"h"' and meta["started"] == "100.0"
    [(t, data)] = db.execute("SELECT time, data FROM snapshots").fetchall()
    zdict = json.loads(meta["zdict"]).encode()
    assert zdict == json.dumps(json.loads(zdict), separators=(",", ":"), ensure_ascii=False).encode()
    assert t == 5.0 and decode_snapshot(data, zdict) == training_snapshot(5.0)
    assert encode_snapshot(training_snapshot(5.0), zdict) == data
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.gputop"], "reading it leaves no files beside it"


def test_snapshots_are_committed_in_batches_every_flush_interval(tmp_path):
    now = [0.0]
    path = tmp_path / "r.gputop"
    rec = Recorder(path, 1.0, flush_every_s=2.0, clock=lambda: now[0])
    with open_recording(path) as reader:
        for i in range(5):  # appended at clock 0..4: commits at 2 (3 snapshots) and 4 (2 more)
            now[0] = float(i)
            rec.append(training_snapshot(float(i)))
            if i == 1:
                assert reader.count() == 0
            if i == 2:
                assert reader.count() == 3
        assert reader.count() == 5
        now[0] = 5.0
        rec.append(training_snapshot(5.0))
        assert reader.count() == 5
        rec.close()
        assert [s.time for s in reader] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_recording_is_readable_while_it_is_being_written(tmp_path):
    path = tmp_path / "live.gputop"
    rec = Recorder(path, 1.0, flush_every_s=0)
    try:
        rec.append(training_snapshot(1.0))
        with open_recording(path) as reader:
            assert [s.time for s in reader] == [1.0]
            rec.append(training_snapshot(2.0))
            assert [s.time for s in reader] == [1.0, 2.0]
            assert reader.damage is None
        assert os.path.exists(f"{path}-wal")
    finally:
        rec.close()


def test_recorder_refuses_an_existing_file_or_a_missing_directory(tmp_path):
    (tmp_path / "taken").write_text("keep me")
    with pytest.raises(RecordingError, match="already exists"):
        Recorder(tmp_path / "taken")
    assert (tmp_path / "taken").read_text() == "keep me"
    with pytest.raises(RecordingError, match="no directory"):
        Recorder(tmp_path / "nope" / "r.gputop")


# -- bad input to the reader ------------------------------------------------------------------------------------


def one_line_error(path: object) -> str:
    with pytest.raises(RecordingError) as caught:
        open_recording(path)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_missing_file(tmp_path):
    assert one_line_error(tmp_path / "absent.gputop") == f"no such file: {tmp_path / 'absent.gputop'}"


def test_random_bytes_and_an_empty_file_are_not_recordings(tmp_path):
    (tmp_path / "random").write_bytes(os.urandom(5000))
    (tmp_path / "empty").write_bytes(b"")
    assert one_line_error(tmp_path / "random").startswith("not a gputop recording")
    assert one_line_error(tmp_path / "empty").startswith("not a gputop recording")
    assert one_line_error(tmp_path).startswith("not a file")


def test_another_sqlite_database_is_not_a_recording(tmp_path):
    db = sqlite3.connect(tmp_path / "other.db")
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    lookalike = sqlite3.connect(tmp_path / "lookalike.db")
    lookalike.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    lookalike.execute("CREATE TABLE snapshots (time REAL, data BLOB)")
    lookalike.commit()
    lookalike.close()

    assert one_line_error(tmp_path / "other.db").startswith("not a gputop recording")
    assert one_line_error(tmp_path / "lookalike.db").startswith("not a gputop recording")


def test_a_newer_schema_version_asks_for_an_upgrade(tmp_path):
    path = tmp_path / "future.gputop"
    Recorder(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()

    message = one_line_error(path)

    assert "written by a newer gputop" in message and message.endswith("upgrade gputop")


def recorded(path, n: int) -> list[Snapshot]:
    """``n`` snapshots that differ (as real ones do, so that the file spans many pages), recorded to ``path``."""
    snaps = [dataclasses.replace(training_snapshot(1000.0 + i), notices=(os.urandom(300).hex(),)) for i in range(n)]
    with Recorder(path, 1.0) as rec:
        for snap in snaps:
            rec.append(snap)
    return snaps


def test_a_truncated_recording_yields_what_can_be_read(tmp_path):
    path = tmp_path / "cut.gputop"
    snaps = recorded(path, 300)
    size = path.stat().st_size
    assert size > 10 * 16384
    with open(path, "r+b") as f:
        f.truncate(size // 2 + 1000)

    with open_recording(path) as recording:
        back = list(recording)

    assert 0 < len(back) < 300
    by_time = {s.time: s for s in snaps}
    assert all(by_time[s.time] == s for s in back)  # every snapshot read is one that was written...
    assert [s.time for s in back] == sorted(s.time for s in back)  # ...in the order it was written
    assert recording.damage is not None and "damaged" in recording.damage and "\n" not in recording.damage


def test_corrupted_snapshot_rows_are_skipped_and_reported(tmp_path):
    path = tmp_path / "bad.gputop"
    snaps = recorded(path, 10)
    db = sqlite3.connect(path)
    db.execute("UPDATE snapshots SET data = x'00112233' WHERE rowid IN (3, 7)")
    db.commit()
    db.close()

    with open_recording(path) as recording:
        back = list(recording)

    assert back == [s for i, s in enumerate(snaps, start=1) if i not in (3, 7)]
    assert recording.damage is not None and "skipped 2" in recording.damage


def test_a_recording_with_a_damaged_header_page_is_an_error(tmp_path):
    path = tmp_path / "hdr.gputop"
    recorded(path, 5)
    data = bytearray(path.read_bytes())
    data[100:4096] = os.urandom(3996)  # the schema on page 1
    path.write_bytes(bytes(data))

    assert "damaged or not a recording" in one_line_error(path) or "not a gputop" in one_line_error(path)


def test_cut_anywhere_the_reader_raises_recording_error_or_yields_written_snapshots(tmp_path):
    whole = tmp_path / "whole.gputop"
    snaps = {s.time: s for s in recorded(whole, 120)}
    data = whole.read_bytes()
    read_some = 0
    for cut in range(0, len(data), len(data) // 23):
        path = tmp_path / f"cut{cut}.gputop"
        path.write_bytes(data[:cut])
        try:
            recording = open_recording(path)
        except RecordingError as exc:
            assert "\n" not in str(exc)
            continue
        with recording:
            back = list(recording)
            assert recording.damage is not None
        assert all(snaps[s.time] == s for s in back)
        read_some += bool(back)
    assert read_some >= 5
