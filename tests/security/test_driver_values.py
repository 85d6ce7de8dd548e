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
