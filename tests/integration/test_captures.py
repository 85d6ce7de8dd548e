"""Real machines as they were: `gputop --once --json` against the fake driver loaded from each real capture.

Every ``tests/data/captures/*.xml`` (``nvidia-smi -q -x`` from a real machine; sources in that folder's
SOURCES.md) becomes the fake's state through ``tests/fakenvml/capture.py``, with the profile of its driver branch;
each captured process is a real sleeping process started here, holding the captured memory. gputop's JSON must
give back what nvidia-smi showed, field by field, and every N/A as null with a reason, never 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeDriver
from tests.fakenvml.capture import MIB, Capture, fake_state, read_capture
from tests.integration.test_cli import gputop

CAPTURES = sorted((Path(__file__).resolve().parents[1] / "data" / "captures").glob("*.xml"))
EXACT = ("name", "uuid", "memory_total_bytes", "memory_used_bytes", "memory_reserved_bytes", "pstate")
EXACT += ("clock_sm_mhz", "clock_mem_mhz", "clock_sm_max_mhz", "clock_mem_max_mhz")
EXACT += ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s", "throttle_reasons", "ecc_uncorrected_volatile")
EXACT += ("ecc_enabled", "pcie_link_gen", "pcie_link_width", "pcie_link_gen_max", "pcie_link_width_max")
EXACT += ("mig_mode", "pci_bus_id")
MEASURED = ("utilization_gpu_percent", "utilization_memory_percent", "temperature_c", "power_w", "power_limit_w")
MEASURED += ("fan_percent",)


def start_processes(capture: Capture, started: list[subprocess.Popen[bytes]]) -> dict[int, int]:
    """One real sleeping process per captured PID (a PID on two GPUs is one process): captured PID -> real."""
    pids = {}
    for captured in sorted({p.pid for p in capture.processes}):
        proc = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(120)"])
        started.append(proc)
        pids[captured] = proc.pid
    return pids


def once_json(capture: Capture, tmp_path: Path, pids: dict[int, int]) -> dict[str, Any]:
    driver = FakeDriver(tmp_path / "state.txt", capture.profile)
    driver.write(fake_state(capture, pids))
    result = gputop("--once", "--json", env=driver.env())
    assert result.returncode == 0, result.stderr
    assert "fakenvml:" not in result.stderr, result.stderr  # the state file parsed cleanly
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_gputop_shows_what_the_capture_shows(path, tmp_path, sleepers):
    capture = read_capture(path)
    pids = start_processes(capture, sleepers)

    doc = once_json(capture, tmp_path, pids)

    assert doc["driver"]["status"] == "ok"
    assert doc["driver"]["driver_version"] == capture.driver_version
    assert doc["driver"]["cuda_version"] == capture.cuda_version
    assert [g["index"] for g in doc["gpus"]] == list(range(len(capture.gpus)))
    for captured, shown in zip(capture.gpus, doc["gpus"], strict=True):
        where = f"{path.name} GPU {shown['index']}"
        assert shown["state"] == "ok", where
        for key, want in captured.values.items():
            got = shown[key]
            if want is None:
                assert got is None, f"{where}: {key} is N/A in the capture, gputop says {got!r}"
                assert shown["unavailable"].get(key), f"{where}: {key} is null without a reason"
            elif key == "mig":  # what nvidia-smi shows of each instance (it names no profile and no MIG UUID)
                assert [{k: i[k] for k in d} for d, i in zip(want, got, strict=True)] == want, (where, got)
            elif key == "memory_free_bytes":  # nvidia-smi rounds each of total, reserved, used, free to MiB
                assert abs(got - want) <= 2 * MIB, (where, key, got, want)
            elif key in MEASURED:
                assert got == pytest.approx(want), (where, key, got, want)
            else:
                assert key in (*EXACT, "memory_free_bytes"), key
                assert got == want, (where, key, got, want)
        for key, want in captured.health.items():
            got = shown["health"][key]
            assert got == want, (where, "health", key, got, want)
            if want is None:
                assert shown["health"]["unavailable"].get(key), f"{where}: health {key} is null without a reason"
        for key, value in shown.items():
            if value is None and key not in ("reason",):
                assert shown["unavailable"].get(key), f"{where}: {key} is null without a reason"

    want_rows = {(pids[p.pid], p.gpu_index): p for p in capture.processes}
    rows = {(r["pid"], r["gpu_index"]): r for r in doc["processes"]}
    assert rows.keys() == want_rows.keys()
    for key, captured_process in want_rows.items():
        row = rows[key]
        assert row["kind"] == captured_process.kind, row
        assert row["gpu_memory_bytes"] == captured_process.used_bytes, row
        if captured_process.used_bytes is None:
            assert row["unavailable"]["gpu_memory_bytes"] == "not reported by the driver"
        assert row["visible"] is True
        assert row["command"] is not None and "time.sleep(120)" in row["command"]
