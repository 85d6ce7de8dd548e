"""Who used the host's CPUs, through the snapshot codec and the recording: it round-trips, deltas included;
snapshots written before it decode with none (the advisor then says it cannot name them); a hostile value is
refused or shown, never obeyed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gputop.codec import snapshot_from_json, snapshot_json
from gputop.model import CpuTakers, CpuUse
from gputop.store import Recorder, open_recording
from tests.ui import training_scenes

TAKERS = CpuTakers(
    processes=(CpuUse(140.0, "bob", 777, "stress"), CpuUse(40.0, "alice", 5000, "pt_data_worker")),
    users=(CpuUse(140.0, "bob"), CpuUse(52.5, "alice")),
)


def held(t: float, takers: CpuTakers | None = TAKERS):
    snap = training_scenes.starved_job(t)
    return dataclasses.replace(snap, host=dataclasses.replace(snap.host, cpu_takers=takers))


def test_who_used_the_cpus_round_trips() -> None:
    snap = held(training_scenes.scenes.T0)

    assert snapshot_from_json(snapshot_json(snap)) == snap


def test_a_recording_keeps_who_used_the_cpus_from_row_to_row(tmp_path: Path) -> None:
    moving = [CpuUse(100.0 + n, "bob", 777, "stress") for n in range(5)]
    snapshots = [held(training_scenes.scenes.T0 + n, None if n == 0 else CpuTakers((moving[n],), ())) for n in range(5)]
    with Recorder(tmp_path / "r.gputop", 1.0, flush_every_s=0) as recorder:
        for snap in snapshots:
            recorder.append(snap)

    with open_recording(tmp_path / "r.gputop") as recording:
        assert [s.host.cpu_takers for s in recording] == [s.host.cpu_takers for s in snapshots]


def test_a_snapshot_written_before_gputop_kept_it_has_none() -> None:
    plain = json.loads(snapshot_json(held(training_scenes.scenes.T0)))
    del plain["host"]["cpu_takers"]

    assert snapshot_from_json(json.dumps(plain)).host.cpu_takers is None


@pytest.mark.parametrize(
    "value",
    [{"processes": [{"cpu_percent": "lots"}], "users": []}, {"processes": "x"}, {"users": [{"user": 5}]}],
)
def test_a_malformed_list_of_cpu_takers_is_refused(value: object) -> None:
    plain = json.loads(snapshot_json(held(training_scenes.scenes.T0)))
    plain["host"]["cpu_takers"] = value

    with pytest.raises(ValueError, match=r"CpuUse|CpuTakers"):
        snapshot_from_json(json.dumps(plain))


def test_a_hostile_process_name_among_the_cpu_takers_comes_out_printable() -> None:
    plain = json.loads(snapshot_json(held(training_scenes.scenes.T0)))
    plain["host"]["cpu_takers"]["processes"][0]["name"] = "\x1b[2Jgone"

    name = snapshot_from_json(json.dumps(plain)).host.cpu_takers.processes[0].name

    assert name == "\\x1b[2Jgone"
