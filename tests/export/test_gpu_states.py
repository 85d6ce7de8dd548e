"""A GPU that falls off the bus, and values the driver cannot give, as a real ``gputop export`` over the fake driver
shows them."""

from __future__ import annotations

from tests.export.scrape import names, value
from tests.fakenvml.state import FakeState
from tests.machines import GIB, h100

UUID_1 = "GPU-6a1b2c3d-0000-4000-8000-000000000001"


def test_a_gpu_lost_while_running_is_up_0_and_its_values_disappear(driver, exporter):
    driver.write(FakeState(gpus=[h100(0), h100(1)]))
    running = exporter("--listen", "127.0.0.1:0", "-d", "0.1")
    running.wait_for(lambda s: value(s, "gputop_gpu_memory_used_bytes", gpu="1") == 25 * GIB)

    driver.write(FakeState(gpus=[h100(0), h100(1, errors={"*": "GPU_IS_LOST"})]))
    samples = running.wait_for(lambda s: value(s, "gputop_gpu_up", gpu="1") == 0)

    assert value(samples, "gputop_gpu_up", gpu="1", uuid=UUID_1, name="NVIDIA H100 80GB HBM3") == 0
    assert [s.name for s in samples if s.labels.get("gpu") == "1"] == ["gputop_gpu_up"]
    assert value(samples, "gputop_gpu_up", gpu="0") == 1
    assert value(samples, "gputop_gpu_memory_used_bytes", gpu="0") == 20 * GIB


def test_unsupported_fields_are_absent_while_measured_zeros_stay(driver, exporter):
    driver.write(FakeState(gpus=[h100(0, gpm_supported=False, util_gpu=0)]))
    running = exporter("--listen", "127.0.0.1:0", "-d", "0.1")

    samples = running.wait_for(lambda s: value(s, "gputop_gpu_busy_ratio") is not None)

    assert not names(samples) & {"gputop_gpu_fan_speed_ratio", "gputop_gpu_sm_activity_ratio"}
    assert value(samples, "gputop_gpu_busy_ratio") == 0
    assert value(samples, "gputop_gpu_ecc_uncorrected_errors_total") == 0
