"""The report a CUDA job leaves when it runs out of memory, from allocator states built in the format
``torch.cuda.memory._snapshot()`` documents (segments of blocks, each block with the frames that allocated it where
the history is recorded): there is no GPU here to fail on."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gputop.probe import oom
from gputop.probe.oom import OomWatch, oom_report

pytestmark = pytest.mark.fast

MIB = 1024**2


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


TORCH_FRAME = frame("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward")


def block(size: int, state: str = "active_allocated", frames: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"address": 0, "size": size, "requested_size": size, "state": state, "frames": frames or []}


def snapshot(*blocks: dict[str, Any], device: int = 0) -> dict[str, Any]:
    total = sum(b["size"] for b in blocks)
    segment = {"device": device, "address": 0, "total_size": total, "stream": 0, "segment_type": "large"}
    return {"segments": [{**segment, "blocks": list(blocks)}], "device_traces": [[]]}


WALKED = [{"device": "cuda:0", "weights_bytes": 100 * MIB, "gradients_bytes": 100 * MIB, "optimizer_bytes": 200 * MIB}]


def test_the_report_sums_what_the_allocator_held_by_state():
    state = snapshot(block(600 * MIB), block(300 * MIB), block(50 * MIB, "inactive"), block(20 * MIB, "inactive"))
    report = oom_report(state, 0, 512 * MIB, 10 * MIB, 1024 * MIB, None)
    assert report["reserved_bytes"] == 970 * MIB
    assert report["allocated_bytes"] == 900 * MIB
    assert report["cached_free_bytes"] == 70 * MIB
    assert report["largest_free_block_bytes"] == 50 * MIB


def test_the_largest_allocations_come_first_with_the_jobs_own_code_before_torchs():
    made = [TORCH_FRAME, frame("train.py", 57, "step"), frame("train.py", 90, "main")]
    state = snapshot(block(10 * MIB), block(300 * MIB, frames=made), block(20 * MIB))
    largest = oom_report(state, 0, MIB, 0, None, None)["largest"]
    assert [entry["bytes"] for entry in largest] == [300 * MIB, 20 * MIB, 10 * MIB]
    assert largest[0]["made_at"] == ["train.py:57 in step", "train.py:90 in main"]


def test_without_a_recorded_history_the_report_says_so_and_has_no_frames():
    report = oom_report(snapshot(block(MIB)), 0, MIB, 0, None, None)
    assert report["history"] is False
    assert report["largest"] == [{"bytes": MIB, "made_at": []}]


def test_the_parts_are_the_last_walks_state_and_the_rest_is_the_steps_activations_and_temporaries():
    report = oom_report(snapshot(block(700 * MIB)), 0, 512 * MIB, 0, None, WALKED)
    assert report["parts"] == {
        "weights": 100 * MIB,
        "gradients": 100 * MIB,
        "optimizer": 200 * MIB,
        "activations_and_temporaries": 300 * MIB,
    }


def test_enough_free_memory_in_pieces_is_fragmentation_and_expandable_segments_is_the_fix():
    state = snapshot(block(500 * MIB), block(40 * MIB, "inactive"), block(40 * MIB, "inactive"))
    (line,) = oom_report(state, 0, 64 * MIB, 30 * MIB, None, None)["fix"]
    assert line.startswith("fragmentation: 83,886,080 bytes are cached in free blocks")
    assert "expandable_segments:True" in line


def test_a_shortfall_is_said_with_the_batch_that_would_fit():
    # 100 MiB short; activations and temporaries hold 400 MiB: three quarters of the batch would fit
    report = oom_report(snapshot(block(800 * MIB)), 0, 110 * MIB, 10 * MIB, None, WALKED)
    assert report["fix"][0] == f"{100 * MIB:,} bytes more than the GPU has free and cached were needed"
    assert "a batch of about 75% of this one would fit" in report["fix"][1]
    assert "shard the optimizer state" in report["fix"][2]


def test_another_devices_segments_are_left_out():
    state = snapshot(block(MIB), device=1)
    assert oom_report(state, 0, MIB, 0, None, None)["allocated_bytes"] == 0


def test_a_malformed_snapshot_gives_a_report_not_an_exception():
    state = {
        "segments": [
            "x",
            {"blocks": [7, {"size": -5, "state": "active_allocated", "frames": [3, {"filename": 9, "line": "x"}]}]},
            {"total_size": True, "blocks": [{"size": 2**70, "state": "active_allocated", "frames": "no"}]},
        ]
    }
    report = oom_report(state, 0, MIB, 0, None, None)
    assert report["reserved_bytes"] == 0
    assert report["largest"][1] == {"bytes": 0, "made_at": ["??:0 in ??"]}
    json.dumps(report, allow_nan=False)


class FakeCuda:
    """The parts of ``torch`` the watch calls, as a CUDA build answers them; ``snapshot`` is what the allocator
    holds."""

    def __init__(self, state: dict[str, Any] | Exception) -> None:
        self.state = state
        self.recorded: list[dict[str, Any]] = []
        self.observers: list[Any] = []
        self.cuda = self
        self.memory = self
        self._C = self

    def _snapshot(self) -> dict[str, Any]:
        if isinstance(self.state, Exception):
            raise self.state
        return self.state

    def _record_memory_history(self, **kwargs: Any) -> None:
        self.recorded.append(kwargs)

    def _cuda_attach_out_of_memory_observer(self, observer: Any) -> None:
        self.observers.append(observer)

    def get_device_properties(self, device: int) -> Any:
        return type("Properties", (), {"total_memory": 80 * 1024 * MIB})()


def watch(tmp_path: Path, torch: FakeCuda, failures: list[str]) -> OomWatch:
    found = OomWatch(str(tmp_path / "reports"), lambda: WALKED, lambda where, exc: failures.append(where))
    found.start(torch)
    return found


def test_the_allocators_call_writes_a_private_report_once_per_failure(tmp_path, monkeypatch):
    monkeypatch.delenv(oom.ENV, raising=False)
    torch, failures = FakeCuda(snapshot(block(MIB))), []
    w = watch(tmp_path, torch, failures)
    (observer,) = torch.observers
    observer(0, 2 * MIB, MIB, 0)
    (path,) = w.written
    assert Path(path).name == f"oom-{os.getpid()}-1.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(Path(path).read_text())["requested_bytes"] == 2 * MIB
    assert failures == []


def test_the_history_is_recorded_bounded_only_when_the_job_asks(tmp_path, monkeypatch):
    unasked = FakeCuda(snapshot())
    monkeypatch.delenv(oom.ENV, raising=False)
    watch(tmp_path, unasked, [])
    monkeypatch.setenv(oom.ENV, "1")
    asked = FakeCuda(snapshot())
    watch(tmp_path, asked, [])
    assert unasked.recorded == []
    assert asked.recorded == [{"max_entries": oom.MAX_ENTRIES, "stacks": "python"}]


def test_a_job_that_retries_writes_a_bounded_number_of_reports(tmp_path, monkeypatch):
    torch = FakeCuda(snapshot(block(MIB)))
    w = watch(tmp_path, torch, [])
    for _ in range(oom.MAX_REPORTS + 4):
        torch.observers[0](0, 2 * MIB, MIB, 0)
    assert len(w.written) == oom.MAX_REPORTS


def test_a_failing_snapshot_is_counted_never_raised(tmp_path):
    torch, failures = FakeCuda(RuntimeError("driver gone")), []
    watch(tmp_path, torch, failures)
    torch.observers[0](0, MIB, 0, 0)
    assert failures == ["oom report"]


def test_a_planted_file_at_the_reports_name_is_not_written_through(tmp_path):
    torch, failures = FakeCuda(snapshot(block(MIB))), []
    (tmp_path / "reports").mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("mine")
    (tmp_path / "reports" / f"oom-{os.getpid()}-1.json").symlink_to(target)
    watch(tmp_path, torch, failures)
    torch.observers[0](0, MIB, 0, 0)
    assert target.read_text() == "mine"
    assert failures == ["oom report"]
