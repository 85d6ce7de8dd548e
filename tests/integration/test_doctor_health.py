"""``gputop doctor``'s GPU health check against the fake driver: each GPU's state and every reading behind it, or
why the GPU or the driver has none."""

from __future__ import annotations

from pathlib import Path

from tests.fakenvml.state import FakeState
from tests.integration.test_doctor import by_id, doctor, doctor_json, state_driver
from tests.machines import h100

HOPPER_AND_OLDER = FakeState(
    gpus=[h100(0), h100(1, row_remapping=False, page_retirement=True, retired_double_bit=2, pcie_replays=7)]
)
"""An H100, which remaps rows and retires no pages, beside a GPU that retires pages and remaps no rows."""


def health_lines(out: str) -> list[str]:
    start = out.index("GPU health")
    return [line.strip() for line in out[start:].splitlines()[:13]]


def test_each_gpus_state_and_readings_or_why_it_has_none(tmp_path: Path) -> None:
    done = doctor(state_driver(tmp_path, HOPPER_AND_OLDER).env(), tmp_path)

    assert done.returncode == 0, done.stderr
    lines = health_lines(done.stdout)
    assert lines[:4] == [
        "GPU health: ok on 2 GPUs",
        "GPU 0: ok",
        "Xid events: watched, none since doctor started (earlier ones are in the kernel log: sudo dmesg | grep -i xid)",
        "remapped rows: 0 correctable, 0 uncorrectable, none pending, none failed",
    ]
    assert lines[4:6] == ["retired pages: N/A (unsupported by this GPU)", "PCIe replays: 0 since the driver loaded"]
    assert lines[6].startswith("time under each clock limit: power 0.0 s, thermal 0.0 s,")
    assert lines[7:11] == [
        "GPU 1: ok",
        "Xid events: watched, none since doctor started (earlier ones are in the kernel log: sudo dmesg | grep -i xid)",
        "remapped rows: N/A (unsupported by this GPU)",
        "retired pages: 0 single-bit, 2 double-bit, none pending",
    ]
    assert lines[11] == "PCIe replays: 7 since the driver loaded"


def test_a_driver_without_the_event_wait_says_xids_are_not_in_it_and_how_to_get_them(tmp_path: Path) -> None:
    done = doctor(state_driver(tmp_path, HOPPER_AND_OLDER, profile="r430").env(), tmp_path)

    lines = health_lines(done.stdout)
    assert lines[0] == "GPU health: ok on 2 GPUs; some readings not in this driver on GPU 0–1"
    assert lines[2:4] == ["Xid events: N/A (not in this driver)", "remapped rows: N/A (not in this driver)"]
    assert "[limited] GPU health:" in done.stdout
    assert "fix: GPU 0–1: upgrade the NVIDIA driver for the health readings it does not have (R450 or later" in (
        done.stdout
    )


def test_a_failed_row_remapping_is_critical_and_says_what_to_do(tmp_path: Path) -> None:
    state = FakeState(gpus=[h100(0), h100(1, remapped_failed=True, remapped_uncorrectable=3)])
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    check = by_id(doc)["health"]
    assert status == 0  # gputop still monitors the GPU
    assert (check["verdict"], check["summary"]) == ("limited", "GPU 1 critical")
    assert check["advice"] == ["GPU 1: a memory row could not be remapped; the GPU needs servicing"]
    failed = check["facts"]["gpus"]["1"]
    assert (failed["state"], failed["remapped_rows_failed"], failed["remapped_rows_uncorrectable"]) == (
        "critical",
        True,
        3,
    )
    assert check["facts"]["gpus"]["0"]["state"] == "ok"
