"""The health state from readings (gputop.health): DCGM's health-watch limits and NVIDIA's Xid catalogue."""

from __future__ import annotations

import pytest

from gputop.codec import snapshot_from_json
from gputop.health import XID_WARN_HOLD_S, judged
from gputop.model import HEALTH_CRITICAL, HEALTH_OK, HEALTH_WARN, GpuHealth, XidCount

pytestmark = pytest.mark.fast
NOW = 1_800_000_000.0


def state_of(readings: GpuHealth, ecc: int | None = 0, thermal_s: float | None = None) -> str:
    return judged(readings, ecc, thermal_s, NOW).state


def test_nothing_seen_is_ok():
    assert state_of(GpuHealth(remapped_rows_correctable=3, pcie_replays=100)) == HEALTH_OK


def test_an_xid_that_asks_for_a_reset_is_critical_and_worst_first():
    health = judged(GpuHealth(xids=(XidCount(13, 1, NOW), XidCount(79, 1, NOW))), 0, None, NOW)

    assert health.state == HEALTH_CRITICAL
    assert health.causes[0].startswith("Xid 79: GPU has fallen off the bus")


def test_an_application_xid_warns_and_passes_after_its_hold():
    fresh = GpuHealth(xids=(XidCount(13, 2, NOW - 10),))
    old = GpuHealth(xids=(XidCount(13, 2, NOW - XID_WARN_HOLD_S - 1),))

    assert (state_of(fresh), state_of(old)) == (HEALTH_WARN, HEALTH_OK)


def test_an_unknown_xid_warns_and_points_to_the_catalogue():
    health = judged(GpuHealth(xids=(XidCount(4242, 1, NOW),)), 0, None, NOW)

    assert health.state == HEALTH_WARN
    assert "Xid catalogue" in health.causes[0]


@pytest.mark.parametrize(
    ("readings", "state"),
    [
        (GpuHealth(remapped_rows_failed=True), HEALTH_CRITICAL),
        (GpuHealth(remapped_rows_pending=True), HEALTH_WARN),
        (GpuHealth(retired_pages_single_bit=10, retired_pages_double_bit=5), HEALTH_WARN),
        (GpuHealth(retired_pages_single_bit=14), HEALTH_OK),
        (GpuHealth(retired_pages_double_bit=60), HEALTH_CRITICAL),
        (GpuHealth(retired_pages_pending=True), HEALTH_WARN),
        (GpuHealth(pcie_replays_per_min=8.0), HEALTH_OK),
        (GpuHealth(pcie_replays_per_min=9.0), HEALTH_WARN),
    ],
)
def test_dcgm_limits(readings, state):
    assert state_of(readings) == state


def test_an_uncorrectable_ecc_error_is_critical():
    assert state_of(GpuHealth(), ecc=1) == HEALTH_CRITICAL


def test_time_held_down_by_heat_warns():
    assert state_of(GpuHealth(), thermal_s=2.5) == HEALTH_WARN


def test_a_recording_from_before_health_decodes_as_not_recorded():
    old = (
        '{"format":3,"time":1.0,"host":{"hostname":"h","cpu_percent":null,"cpu_percent_per_core":[],"cpu_count":1,'
        '"usable_cpu_count":1,"load_average":null,"memory_total_bytes":1,"memory_used_bytes":0,'
        '"memory_available_bytes":1,"swap_total_bytes":0,"swap_used_bytes":0},"driver":{"status":"ok"},'
        '"gpus":[{"index":0,"uuid":"GPU-0","name":"H100"}]}'
    )

    gpu = snapshot_from_json(old).gpus[0]

    assert gpu.health is None
    assert gpu.unavailable["health"] == "not recorded"


def test_health_survives_a_recording():
    from gputop.codec import snapshot_json
    from gputop.model import DriverInfo, Gpu, Snapshot
    from tests.factories import host_info

    health = judged(
        GpuHealth(
            xids=(XidCount(48, 1, NOW),),
            remapped_rows_correctable=1,
            violation_s=(("thermal", 2.5),),
            unavailable={"retired_pages_pending": "unsupported"},
        ),
        0,
        None,
        NOW,
    )
    snap = Snapshot(time=NOW, host=host_info(), driver=DriverInfo("ok"), gpus=(Gpu(0, "GPU-0", "H100", health=health),))

    assert snapshot_from_json(snapshot_json(snap)).gpus[0].health == health
