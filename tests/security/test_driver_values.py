"""Values from the driver that no healthy driver gives are shown as unavailable, never passed on."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeState
from tests.machines import h100


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_sm_activity_is_null_with_a_reason_and_the_json_stays_valid(
    fake_driver: Callable[..., FakeDriver], value: float
) -> None:
    driver = fake_driver(FakeState(gpus=[h100(0, gpm_sm_util=value)]))
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"], env=driver.env(), capture_output=True, check=True
    ).stdout
    document = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json"))
    (gpu,) = document["gpus"]
    assert gpu["sm_activity_percent"] is None
    assert gpu["unavailable"]["sm_activity_percent"] == "invalid value from the driver"


U32 = 2**32 - 1
IMPOSSIBLE = {
    "util_gpu": (U32, "utilization_gpu_percent"),
    "util_memory": (250, "utilization_memory_percent"),
    "temperature_c": (U32, "temperature_c"),
    "power_mw": (U32, "power_w"),
    "power_limit_mw": (U32, "power_limit_w"),
    "clock_sm_mhz": (U32, "clock_sm_mhz"),
    "pcie_rx_kbps": (U32, "pcie_rx_bytes_per_s"),
    "pcie_link_gen": (U32, "pcie_link_gen"),
    "memory_used": (2**64 - 1, "memory_used_bytes"),
    "gpm_sm_util": (150.0, "sm_activity_percent"),
    "gpm_sm_occupancy": (-5.0, "sm_occupancy_percent"),
}
"""What a broken board or a vGPU host has the driver answer, and the field each lands in."""


def test_impossible_readings_from_the_driver_are_null_with_a_reason_and_never_shown(
    fake_driver: Callable[..., FakeDriver],
) -> None:
    overrides = {name: value for name, (value, _) in IMPOSSIBLE.items()}
    driver = fake_driver(FakeState(gpus=[h100(0, **overrides), h100(1)]))
    run = [sys.executable, "-m", "gputop", "--once"]
    document = json.loads(subprocess.run([*run, "--json"], env=driver.env(), capture_output=True, check=True).stdout)
    broken, healthy = document["gpus"]
    for _, field in IMPOSSIBLE.values():
        assert broken[field] is None, field
        assert broken["unavailable"][field] == "invalid value from the driver", field
    assert not any("invalid" in reason for reason in healthy["unavailable"].values())
    assert (broken["memory_total_bytes"], broken["pstate"]) == (80 * 1024**3, 0)  # the readings that are fine stay

    table = subprocess.run(run, env=driver.env(), capture_output=True, check=True, text=True).stdout
    assert str(U32) not in table and "EiB" not in table and "150%" not in table and "-5" not in table
