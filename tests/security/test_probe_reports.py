"""Hostile probe reports: whatever a report file holds, the monitor uses a checked report or skips that one
process's report with the reason, in bounded time and memory, and never raises."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop.collect.probe_reader import MAX_REPORT_BYTES, read_report
from gputop.collect.sampler import SnapshotMaker
from gputop.collect.training import TrainingCollector
from gputop.document import snapshot_to_json
from gputop.model import PROBE_FOREIGN, PROBE_MALFORMED, PROBE_NONE, PROBE_OK, PROBE_STALE, ProbeReport
from gputop.probe import channel
from gputop.probe.probe import Probe
from gputop.sanitize import printable
from tests.training.conftest import report_for, start_ticks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

STATUSES = {PROBE_OK, PROBE_NONE, PROBE_STALE, PROBE_MALFORMED, PROBE_FOREIGN}
LOADER = {
    "id": 1,
    "requested": {"batch_size": 8, "num_workers": 2, "pin_memory": True, "start_method": "fork"},
    "effective": {"batch_size": 8, "num_workers": 2, "pin_memory": False, "timeout_s": 0},
    "worker_pids": [],
    "passes": 2,
    "batches": 40,
    "window_s": 10.0,
    "window_batches": 30,
    "data_wait_share": 0.4,
    "steps_per_s": 3.0,
    "samples_per_s": 24.0,
    "waiting_now_s": 1.0,
    "last_batch_age_s": 1.0,
    "pass_start_s": 0.5,
    "pass_start_wait_share": 0.1,
}
DEVICE = {
    "device": 0,
    "uuid": "GPU-1234",
    "allocated_bytes": 1 << 30,
    "reserved_bytes": 2 << 30,
    "num_ooms": 0,
}


@pytest.fixture
def job(spawn):
    return spawn()


def view_of(pid: int, probe_dir: Path):
    maker = SnapshotMaker(focus_pid=pid, training=TrainingCollector(probe_dir=str(probe_dir)))
    maker.start()
    try:
        snap = maker.one_shot()
    finally:
        maker.close()
    return snap, snap.training_view(pid)


def full_report(pid: int, **fields: Any) -> dict[str, Any]:
    cuda = {"devices": [DEVICE], "host_pinned": {"allocated_bytes": 4096, "num_host_alloc": 1}}
    return copy.deepcopy(report_for(pid, loaders=[LOADER], cuda=cuda, cuda_reason=None, **fields))


def test_a_well_formed_report_still_reads_whole(job, probe_dir: Path) -> None:
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(full_report(job.pid)))

    _, view = view_of(job.pid, probe_dir)

    assert view.probe.status == PROBE_OK, view.probe.reason
    (loader,) = view.probe.loaders
    assert (loader.data_wait_share, loader.requested.start_method, loader.effective.timeout_s) == (0.4, "fork", 0.0)
    assert (view.probe.cuda[0].reserved_bytes, view.probe.pinned_host.allocated_bytes) == (2 << 30, 4096)


def test_how_the_job_does_its_math_reads_into_the_probe_report(job, probe_dir: Path) -> None:
    math = {"autocast": False, "float32_matmul_precision": "highest", "parameter_dtypes": ["float32"]}
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(full_report(job.pid, **math)))

    _, view = view_of(job.pid, probe_dir)

    assert view.probe.status == PROBE_OK, view.probe.reason
    assert (view.probe.autocast, view.probe.float32_matmul_precision) == (False, "highest")
    assert view.probe.parameter_dtypes == ("float32",)


TENSORS = {
    "devices": [
        {
            "device": "cuda:0",
            "parameters": 1000,
            "weights_bytes": 4000,
            "gradients_bytes": 4000,
            "optimizer_bytes": 8000,
            "weight_dtypes": {"float32": 4000},
            "allocated_after_step_bytes": 20000,
        }
    ],
    "optimizers": ["AdamW"],
    "age_s": 1.5,
}


DEV0 = TENSORS["devices"][0]  # type: ignore[index]


def test_where_the_tensors_memory_goes_reads_into_the_probe_report(job, probe_dir: Path) -> None:
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(full_report(job.pid, tensors=TENSORS)))

    _, view = view_of(job.pid, probe_dir)

    assert view.probe.status == PROBE_OK, view.probe.reason
    (device,) = view.probe.tensors
    assert (device.cuda_index, device.weights_bytes, device.optimizer_bytes) == (0, 4000, 8000)
    assert (device.weight_dtypes, device.allocated_after_step_bytes) == ((("float32", 4000),), 20000)
    assert (view.probe.optimizers, view.probe.tensors_age_s) == (("AdamW",), 1.5)


def test_a_deeply_nested_report_is_skipped_and_the_view_stays(job, probe_dir: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(report_for(job.pid)).replace('"loaders": []', f'"loaders": [], "extra": {deep}')
    (probe_dir / f"{job.pid}.json").write_text(text)

    _, view = view_of(job.pid, probe_dir)

    assert view is not None, "a report must never cost the training view"
    assert (view.probe.status, view.probe.reason) == (PROBE_MALFORMED, "malformed report: nested too deeply")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_and_json_output_stays_valid(job, probe_dir: Path, constant: str) -> None:
    text = json.dumps(full_report(job.pid)).replace('"data_wait_share": 0.4', f'"data_wait_share": {constant}')
    (probe_dir / f"{job.pid}.json").write_text(text)

    snap, view = view_of(job.pid, probe_dir)

    assert view.probe.status == PROBE_MALFORMED
    assert "not a finite number" in view.probe.reason
    json.loads(snapshot_to_json(snap), parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"cuda": {"devices": [{**DEVICE, "allocated_bytes": 1 << 80}]}}, "allocated_bytes: out of range"),
        ({"cuda": {"devices": [{**DEVICE, "num_ooms": -1}]}}, "num_ooms: out of range"),
        ({"loaders": [{**LOADER, "worker_pids": [1 << 40]}]}, "worker_pids: not a list of PIDs"),
        ({"loaders": [{**LOADER, "batches": 1.5}]}, "batches: not an integer"),
        ({"loaders": [{**LOADER, "batches": True}]}, "batches: not an integer"),
        ({"loaders": [{**LOADER, "steps_per_s": "fast"}]}, "steps_per_s: not a number"),
        ({"loaders": [{**LOADER, "data_wait_share": 3.0}]}, "data_wait_share: out of range"),
        ({"loaders": [{**LOADER, "worker_batch_p95_s": -0.3}]}, "worker_batch_p95_s: out of range"),
        ({"torch": ["2.13"]}, "torch: not a string"),
        ({"loaders": [LOADER] * 100}, "too many loaders"),
        ({"autocast": "yes"}, "autocast: not true or false"),
        ({"float32_matmul_precision": "\x1b[2Jhigh"}, "float32_matmul_precision: not a short name"),
        ({"float32_matmul_precision": "h" * 100}, "float32_matmul_precision: not a short name"),
        ({"parameter_dtypes": ["float32", 32]}, "parameter_dtypes: not a list of dtype names"),
        ({"parameter_dtypes": ["float32"] * 9}, "too many parameter dtypes"),
        ({"tensors": {**TENSORS, "devices": [{**DEV0, "device": "tpu:0"}]}}, "tensor device: not cpu or cuda:N"),
        ({"tensors": {**TENSORS, "devices": [{**DEV0, "weights_bytes": -4}]}}, "weights_bytes: out of range"),
        ({"tensors": {**TENSORS, "devices": [{**DEV0, "weight_dtypes": {"\x1b[2J": 4}}]}}, "weight_dtypes: not a map"),
        ({"tensors": {**TENSORS, "devices": [DEV0] * 65}}, "too many tensor devices"),
        ({"tensors": {**TENSORS, "optimizers": ["Adam\x1b]0;pwned\x07"]}}, "optimizers: not a list of class names"),
        ({"tensors": [TENSORS]}, "expected an object, got list"),
    ],
)
def test_values_of_the_wrong_type_or_out_of_range_are_refused(job, probe_dir: Path, fields: dict, reason: str) -> None:
    (probe_dir / f"{job.pid}.json").write_text(json.dumps({**full_report(job.pid), **fields}))

    _, view = view_of(job.pid, probe_dir)

    assert (view.probe.status, view.probe.loaders, view.probe.cuda) == (PROBE_MALFORMED, (), ())
    assert reason in view.probe.reason


def test_a_pid_that_is_not_an_integer_is_refused(job, probe_dir: Path) -> None:
    (probe_dir / f"{job.pid}.json").write_text(json.dumps({**full_report(job.pid), "pid": float(job.pid)}))

    _, view = view_of(job.pid, probe_dir)

    assert (view.probe.status, view.probe.reason) == (
        PROBE_MALFORMED,
        f"malformed report: report names PID {job.pid}.0",
    )


def test_strings_from_a_report_are_made_printable_and_short(job, probe_dir: Path) -> None:
    fields = {"torch": "2.13\x1b]0;owned\x07", "last_failure": "boom\n" + "x" * 100_000}
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(full_report(job.pid, **fields)))

    _, view = view_of(job.pid, probe_dir)

    assert view.probe.torch_version == "2.13\\x1b]0;owned\\x07"
    assert view.probe.last_failure.startswith("boom\\x0axxx")
    assert len(view.probe.last_failure) <= 300


@pytest.mark.parametrize("name", ["99999999999999999999.json", "\u00b2\u00b3.json", "0.json", "-1.json"])
def test_a_report_name_that_is_no_pid_is_left_alone(job, probe_dir: Path, name: str) -> None:
    (probe_dir / name).write_text("{}")
    (probe_dir / f"{job.pid}.json").write_text(json.dumps(full_report(job.pid)))

    _, view = view_of(job.pid, probe_dir)
    run = subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--headless", "--", sys.executable, "-c", "raise SystemExit(3)"],
        env={**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert view.probe.status == PROBE_OK
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    assert (probe_dir / name).exists()


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_the_probe_writes_its_report_through_a_new_temporary_file(probe_dir: Path, tmp_path: Path, link: str) -> None:
    # A name left or put at the probe's temporary file is never written through: a hard link would let the write
    # truncate and fill another file of the user's.
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    temp = probe_dir / ".1234.json.tmp"
    os.link(victim, temp) if link == "hard" else temp.symlink_to(victim)

    channel.write_report(str(probe_dir), 1234, b'{"new": true}')

    assert victim.read_text() == "precious\n"
    assert (probe_dir / "1234.json").read_text() == '{"new": true}'
    assert sorted(os.listdir(probe_dir)) == ["1234.json"]


def test_writes_of_one_process_from_two_threads_neither_fail_nor_mix(probe_dir: Path) -> None:
    # The writer thread and a write at exit (or the benchmark's timed writes) can overlap: the temporary file one
    # created is not the other's to remove.
    probe = Probe(str(probe_dir))
    threads = [threading.Thread(target=lambda: [probe.write() for _ in range(300)]) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (probe.failures, probe.last_failure) == (0, None)
    assert json.loads((probe_dir / f"{os.getpid()}.json").read_text())["pid"] == os.getpid()


# -- any bytes at all ------------------------------------------------------------------------------------------

TIME_LIMIT_S = 1.0
"""Of CPU time: the reader's own work, whatever else the machine runs."""
MEMORY_LIMIT = 32 << 20


def read_bounded(directory: Path, data: bytes) -> ProbeReport:
    """Read ``data`` as this process's report; fail unless it ends in bounded time and memory, without raising."""
    (directory / f"{os.getpid()}.json").write_bytes(data)
    tracemalloc.start()  # the read alone: its peak is the reader's own, not what the test holds besides
    try:
        started = time.thread_time()
        report = read_report(str(directory), os.getpid(), OWN_START_TICKS, time.time())
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < TIME_LIMIT_S, f"{elapsed:.2f} s of CPU for {data[:60]!r}..."
    assert peak < MEMORY_LIMIT, f"{peak >> 20} MiB for {data[:60]!r}..."
    check(report)
    return report


def check(report: ProbeReport) -> None:
    """What every report the monitor hands on is: a known status, and where used, only sane values."""
    assert report.status in STATUSES
    if report.status != PROBE_OK:
        assert report.loaders == () and report.cuda == ()
        return
    for value in values(report):
        if isinstance(value, float):
            assert math.isfinite(value) and 0 <= value < 1e18, value
        elif isinstance(value, int) and not isinstance(value, bool):
            assert 0 <= value < 1 << 63, value
        elif isinstance(value, str):
            assert printable(value) == value and len(value) <= 300, value
            value.encode()  # no lone surrogates: every string can be written out


def values(obj: Any) -> list[Any]:
    if hasattr(obj, "__dataclass_fields__"):
        return [v for name in obj.__dataclass_fields__ for v in values(getattr(obj, name))]
    if isinstance(obj, (tuple, list)):
        return [v for item in obj for v in values(item)]
    if isinstance(obj, dict):
        return [v for item in obj.values() for v in values(item)]
    return [obj]


OWN_START_TICKS = start_ticks(os.getpid())


@pytest.fixture(scope="module")
def traced() -> Any:
    """Each read traces its own allocations (``read_bounded``), and leaves no tracing running: traced, drawing the
    examples of the properties took several times longer than the reads."""
    yield
    assert not tracemalloc.is_tracing()


@pytest.fixture(scope="module")
def own_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("own") / "probe"
    path.mkdir(mode=0o700)
    return path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096))
def test_any_bytes_are_a_report_or_a_clean_skip(traced, own_dir: Path, data: bytes) -> None:
    read_bounded(own_dir, data)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
PATHS = [
    ("rank",),
    ("torch",),
    ("failures",),
    ("last_failure",),
    ("written_at",),
    ("start_ticks",),
    ("loaders",),
    ("loaders", 0),
    ("loaders", 0, "id"),
    ("loaders", 0, "requested"),
    ("loaders", 0, "effective", "num_workers"),
    ("loaders", 0, "effective", "start_method"),
    ("loaders", 0, "worker_pids"),
    ("loaders", 0, "data_wait_share"),
    ("loaders", 0, "waiting_now_s"),
    ("cuda",),
    ("cuda", "devices"),
    ("cuda", "devices", 0, "uuid"),
    ("cuda", "devices", 0, "reserved_bytes"),
    ("cuda", "host_pinned"),
    ("cuda", "host_pinned", "allocated_bytes"),
    ("loaders", 0, "created_at"),
    ("step",),
    ("step", "clock"),
    ("step", "step_s"),
    ("step", "phases_s"),
    ("step", "phases_s", "forward"),
    ("step", "sync_sites"),
    ("step", "sync_sites", 0),
    ("step", "sync_sites", 0, "site"),
    ("step", "unavailable"),
]
STEP = {
    "boundary": "DataLoader",
    "clock": "cuda",
    "step_s": 0.016,
    "phases_s": {"forward": 0.006, "backward": 0.009},
    "sync_sites": [{"site": "train.py:57", "call": "item", "per_step": 1.0}],
    "unavailable": {"flops_per_step": "not counted yet"},
}


def set_path(doc: Any, path: tuple, value: Any) -> None:
    """Put ``value`` at ``path`` in ``doc``, if the containers on the way are still there."""
    *way, last = path
    for key in way:
        if isinstance(doc, dict):
            doc = doc.get(key)
        elif isinstance(doc, list) and isinstance(key, int) and key < len(doc):
            doc = doc[key]
        else:
            return
    if isinstance(doc, dict) or (isinstance(doc, list) and isinstance(last, int) and last < len(doc)):
        doc[last] = value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES), min_size=1, max_size=4))
def test_a_report_with_any_values_anywhere_is_a_report_or_a_clean_skip(traced, own_dir: Path, changes) -> None:
    doc = full_report(os.getpid(), step=STEP)
    for path, value in changes:
        set_path(doc, path, value)
    read_bounded(own_dir, json.dumps(doc).encode())


def worst_cases() -> dict[str, tuple[bytes, str | None]]:
    """Reports at the size limit built to cost the most to parse, check and hold, and the status each gets (None:
    either, as long as it is bounded)."""
    head = json.dumps(report_for(os.getpid()))[:-1]

    def filled(prefix: str, item: str, suffix: str = "") -> bytes:
        room = MAX_REPORT_BYTES - len(head) - len(prefix) - len(suffix) - 8
        return f"{head}, {prefix}[{','.join([item] * (room // (len(item) + 1)))}]{suffix}}}".encode()

    half = MAX_REPORT_BYTES // 2
    many_keys = ",".join(f'"k{i}":0' for i in range(MAX_REPORT_BYTES // 12))
    return {
        "open brackets": (b"[" * MAX_REPORT_BYTES, PROBE_MALFORMED),
        "deep and balanced": (b"[" * half + b"]" * half, PROBE_MALFORMED),
        "escaped quotes": (b'"' + b'\\"' * (half - 1), PROBE_MALFORMED),
        "quotes": (b'"' * MAX_REPORT_BYTES, PROBE_MALFORMED),
        "long number": (b"1" * MAX_REPORT_BYTES, PROBE_MALFORMED),
        "long float": (b"0." + b"1" * (MAX_REPORT_BYTES - 2), PROBE_MALFORMED),
        "over the limit": (b" " * (MAX_REPORT_BYTES + 1), PROBE_MALFORMED),
        "minimal loaders": (filled('"loaders": ', '{"id":1}'), PROBE_MALFORMED),
        "worker pids": (filled('"loaders": [{"id": 1, "worker_pids": ', "1234", "}]"), PROBE_MALFORMED),
        "empty lists": (filled('"extra": ', "[]"), None),
        "empty objects": (filled('"extra": ', "{}"), None),
        "many keys": (f"{head}, {many_keys}}}".encode(), None),
    }


@pytest.mark.parametrize("name", list(worst_cases()))
def test_the_costliest_reports_are_bounded(traced, own_dir: Path, name: str) -> None:
    data, status = worst_cases()[name]
    assert len(data) <= MAX_REPORT_BYTES or name == "over the limit"

    report = read_bounded(own_dir, data)

    assert status is None or report.status == status
