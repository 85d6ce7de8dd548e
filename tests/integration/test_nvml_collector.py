"""The NVML collector against the fake driver, through the real pynvml: fields, faults and driver branches."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gputop.collect.nvml import NvmlCollector
from gputop.model import GPU_LOST_STATE, GPU_OK, INVALID, MEASURING, NO_PERMISSION, NOT_IN_DRIVER, UNSUPPORTED
from tests.fakenvml.build import call_count
from tests.fakenvml.state import FakeProcess, FakeSample, FakeState
from tests.machines import GIB, h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def collector() -> Iterator[NvmlCollector]:
    nvml = NvmlCollector(retry_lost_after_s=0.0)
    yield nvml
    nvml.close()


def test_every_gpu_field_equals_the_driver_state(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0), h100(1, memory_used=3 * GIB, clocks_event_reasons=0x60)]))

    gpus, _ = collector.read(slow=True)

    g = gpus[1]
    assert (g.index, g.name, g.uuid, g.state) == (
        1,
        "NVIDIA H100 80GB HBM3",
        "GPU-6a1b2c3d-0000-4000-8000-000000000001",
        GPU_OK,
    )
    assert g.memory_total_bytes == 80 * GIB
    assert g.memory_used_bytes == 3 * GIB
    assert g.memory_reserved_bytes == 512 * 1024**2
    assert g.memory_free_bytes == 80 * GIB - 3 * GIB - 512 * 1024**2
    assert (g.utilization_gpu_percent, g.utilization_memory_percent) == (87, 41)
    assert g.temperature_c == 62
    assert g.power_w == pytest.approx(512.345)
    assert g.power_limit_w == 700
    assert g.pstate == 0
    assert (g.clock_sm_mhz, g.clock_mem_mhz, g.clock_sm_max_mhz, g.clock_mem_max_mhz) == (1755, 2619, 1980, 2619)
    assert (g.pcie_rx_bytes_per_s, g.pcie_tx_bytes_per_s) == (48_000 * 1024, 1_200 * 1024)
    assert g.throttle_reasons == ("sw_thermal_slowdown", "hw_thermal_slowdown")
    assert g.ecc_uncorrected_volatile == 0


def test_driver_versions_come_from_the_driver(fake_driver, collector):
    fake_driver(FakeState(driver_version="550.54.15", nvml_version="12.550.54.15", cuda_version=12040))

    driver = collector.start()

    assert (driver.status, driver.driver_version, driver.nvml_version, driver.cuda_version) == (
        "ok",
        "550.54.15",
        "12.550.54.15",
        "12.4",
    )


def test_sm_activity_comes_from_gpm_once_two_samples_exist(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, gpm_sm_util=63.5)]))

    first, _ = collector.read(slow=False)
    time.sleep(0.01)
    second, _ = collector.read(slow=False)

    assert first[0].sm_activity_percent is None
    assert first[0].unavailable["sm_activity_percent"] == MEASURING
    assert second[0].sm_activity_percent == 63.5


def test_gpm_reuses_two_sample_buffers_and_follows_the_driver_every_tick(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, gpm_sm_util=10.0)]))
    seen = []
    for tick in range(6):
        if tick:
            driver.write(FakeState(gpus=[h100(0, gpm_sm_util=10.0 + tick)]))
        gpus, _ = collector.read(slow=False)
        seen.append(gpus[0].sm_activity_percent)

    assert seen == [None, 11.0, 12.0, 13.0, 14.0, 15.0]
    # Two buffers for the whole run, none freed: a tick asks for a sample and the metrics, nothing else.
    assert call_count(driver.lib, "nvmlGpmSampleAlloc") == 2
    assert call_count(driver.lib, "nvmlGpmSampleFree") == 0
    assert call_count(driver.lib, "nvmlGpmSampleGet") == 6


def test_gpm_measures_again_after_the_gpu_came_back(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, gpm_sm_util=40.0)]))
    collector.read(slow=False)
    collector.read(slow=False)
    driver.write(FakeState(gpus=[h100(0, errors={"*": "GPU_IS_LOST"})]))
    lost, _ = collector.read(slow=False)
    driver.write(FakeState(gpus=[h100(0, gpm_sm_util=55.0)]))
    first_back, _ = collector.read(slow=False)
    second_back, _ = collector.read(slow=False)

    assert lost[0].state == GPU_LOST_STATE
    assert call_count(driver.lib, "nvmlGpmSampleFree") == 2  # both buffers, when the GPU was lost
    assert first_back[0].unavailable["sm_activity_percent"] == MEASURING
    assert second_back[0].sm_activity_percent == 55.0


def test_gpm_profiling_metrics_come_in_the_same_request(fake_driver, collector):
    gpu = h100(
        0,
        gpm_sm_util=16.0,
        gpm_sm_occupancy=9.25,
        gpm_any_tensor_util=2.0,
        gpm_dram_bw_util=11.0,
        gpm_fp64_util=0.0,
        gpm_fp32_util=7.5,
        gpm_fp16_util=1.0,
        gpm_pcie_tx_mib=2.0,
        gpm_pcie_rx_mib=512.0,
        gpm_nvlink_tx_mib=-1.0,  # no NVLink: NOT_SUPPORTED for that metric only
        gpm_nvlink_rx_mib=-1.0,
    )
    fake_driver(FakeState(gpus=[gpu]))

    first, _ = collector.read(slow=False)
    time.sleep(0.01)
    second, _ = collector.read(slow=False)

    assert first[0].tensor_activity_percent is None
    assert first[0].unavailable["gpm_pcie_rx_bytes_per_s"] == MEASURING
    g = second[0]
    assert (g.sm_activity_percent, g.sm_occupancy_percent, g.tensor_activity_percent) == (16.0, 9.2, 2.0)
    assert (g.dram_bandwidth_percent, g.fp64_activity_percent, g.fp32_activity_percent) == (11.0, 0.0, 7.5)
    assert g.fp16_activity_percent == 1.0
    assert (g.gpm_pcie_tx_bytes_per_s, g.gpm_pcie_rx_bytes_per_s) == (2 * 1024 * 1024, 512 * 1024 * 1024)
    assert g.nvlink_tx_bytes_per_s is None and g.nvlink_rx_bytes_per_s is None
    assert g.unavailable["nvlink_tx_bytes_per_s"] == UNSUPPORTED
    assert "tensor_activity_percent" not in g.unavailable


def test_gpu_without_gpm_has_no_sm_activity(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, gpm_supported=False)]))

    collector.read(slow=False)
    gpus, _ = collector.read(slow=False)

    assert gpus[0].sm_activity_percent is None
    assert gpus[0].unavailable["sm_activity_percent"] == UNSUPPORTED
    assert gpus[0].unavailable["tensor_activity_percent"] == UNSUPPORTED


def test_unsupported_field_is_none_with_reason(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, errors={"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"})]))

    gpus, _ = collector.read(slow=True)

    assert gpus[0].fan_percent is None
    assert gpus[0].unavailable["fan_percent"] == UNSUPPORTED


def test_unsupported_call_is_not_repeated(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, errors={"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"})]))

    collector.read(slow=True)
    for _ in range(3):
        collector.read(slow=True)

    assert driver.calls("nvmlDeviceGetFanSpeed") == 1


def test_field_without_permission_is_none_with_reason(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, errors={"nvmlDeviceGetPowerUsage": "NO_PERMISSION"})]))

    gpus, _ = collector.read(slow=True)

    assert gpus[0].power_w is None
    assert gpus[0].unavailable["power_w"] == NO_PERMISSION
    assert gpus[0].temperature_c == 61


def test_unknown_error_on_one_field_keeps_the_rest(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, errors={"nvmlDeviceGetTemperature": "UNKNOWN"})]))

    gpus, _ = collector.read(slow=True)

    assert gpus[0].temperature_c is None
    assert gpus[0].unavailable["temperature_c"].startswith("error: ")
    assert gpus[0].memory_total_bytes == 80 * GIB


def test_lost_gpu_is_marked_while_the_others_keep_reporting(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0), h100(1)]))
    collector.read(slow=True)

    driver.write(FakeState(gpus=[h100(0), h100(1, errors={"*": "GPU_IS_LOST"})]))
    gpus, _ = collector.read(slow=True)

    assert gpus[0].state == GPU_OK and gpus[0].memory_used_bytes == 20 * GIB
    assert gpus[1].state == GPU_LOST_STATE
    assert "lost" in gpus[1].reason
    assert gpus[1].memory_used_bytes is None
    assert gpus[1].name == "NVIDIA H100 80GB HBM3"


def test_lost_gpu_comes_back_when_the_driver_answers_again(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, errors={"*": "GPU_IS_LOST"})]))
    lost, _ = collector.read(slow=True)

    driver.write(FakeState(gpus=[h100(0)]))
    back, _ = collector.read(slow=True)

    assert lost[0].state == GPU_LOST_STATE
    assert back[0].state == GPU_OK
    assert back[0].memory_used_bytes == 20 * GIB


def test_lost_gpu_is_left_alone_until_its_retry_time(fake_driver):
    driver = fake_driver(FakeState(gpus=[h100(0, errors={"*": "GPU_IS_LOST"})]))
    nvml = NvmlCollector(retry_lost_after_s=60.0)
    try:
        nvml.read(slow=True)
        driver.write(FakeState(gpus=[h100(0)]))
        gpus, _ = nvml.read(slow=True)
    finally:
        nvml.close()

    assert gpus[0].state == GPU_LOST_STATE


def test_reset_required_is_shown_as_lost(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, errors={"*": "RESET_REQUIRED"})]))

    gpus, _ = collector.read(slow=True)

    assert gpus[0].state == GPU_LOST_STATE
    assert "reset" in gpus[0].reason


@pytest.mark.parametrize(
    ("init_error", "words"),
    [
        ("DRIVER_NOT_LOADED", "not loaded"),
        ("LIB_RM_VERSION_MISMATCH", "reboot"),
        ("NO_PERMISSION", "permission"),
        ("UNKNOWN", "NVML initialisation failed"),
    ],
)
def test_init_failure_makes_the_driver_unavailable_with_a_reason(fake_driver, collector, init_error, words):
    fake_driver(FakeState(gpus=[h100(0)], init_error=init_error))

    gpus, processes = collector.read(slow=True)

    assert collector.driver.status == "unavailable"
    assert words in collector.driver.reason
    assert (gpus, processes) == ([], [])


def test_processes_list_pid_memory_and_kind(fake_driver, collector):
    fake_driver(
        FakeState(
            gpus=[
                h100(
                    0,
                    processes=[
                        FakeProcess(pid=4242, used_memory=7 * GIB),
                        FakeProcess(pid=4343, used_memory=GIB, kind="graphics"),
                        FakeProcess(pid=4444, used_memory=2 * GIB),
                        FakeProcess(pid=4444, used_memory=GIB, kind="graphics"),
                    ],
                )
            ]
        )
    )

    _, processes = collector.read(slow=True)

    by_pid = {p.pid: p for p in processes}
    assert (by_pid[4242].kind, by_pid[4242].gpu_memory_bytes, by_pid[4242].gpu_index) == ("compute", 7 * GIB, 0)
    assert by_pid[4343].kind == "graphics"
    assert by_pid[4444].kind == "compute+graphics"
    assert by_pid[4444].gpu_memory_bytes == 2 * GIB


def test_per_process_utilization_reads_only_newer_samples(fake_driver, collector):
    now_us = int(time.time() * 1e6)
    gpu = h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])
    gpu.samples = [FakeSample(pid=4242, timestamp_us=now_us - 2_000_000, sm=40, mem=10)]
    driver = fake_driver(FakeState(gpus=[gpu]))
    _, first = collector.read(slow=True)

    gpu.samples.append(FakeSample(pid=4242, timestamp_us=now_us - 1_000_000, sm=80, mem=30))
    driver.write(FakeState(gpus=[gpu]))
    _, second = collector.read(slow=True)

    assert (first[0].sm_percent, first[0].memory_bandwidth_percent) == (40, 10)
    assert (second[0].sm_percent, second[0].memory_bandwidth_percent) == (80, 30)


def test_a_process_utilization_over_100_percent_is_null_with_the_drivers_reason(fake_driver, collector):
    now_us = int(time.time() * 1e6)
    gpu = h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])
    gpu.samples = [FakeSample(pid=4242, timestamp_us=now_us - 1_000_000, sm=250, mem=30)]
    fake_driver(FakeState(gpus=[gpu]))

    _, (process,) = collector.read(slow=True)

    assert (process.sm_percent, process.unavailable["sm_percent"]) == (None, INVALID)
    assert (process.memory_bandwidth_percent, process.gpu_memory_bytes) == (30, GIB)


def test_no_new_utilization_samples_is_not_an_error(fake_driver, collector):
    now_us = int(time.time() * 1e6)
    gpu = h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])
    gpu.samples = [FakeSample(pid=4242, timestamp_us=now_us, sm=55, mem=5)]
    fake_driver(FakeState(gpus=[gpu]))
    collector.read(slow=True)

    _, again = collector.read(slow=True)

    assert again[0].sm_percent == 55
    assert "sm_percent" not in again[0].unavailable


def test_process_without_recent_sample_has_no_sm_percent(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])]))

    _, processes = collector.read(slow=True)

    assert processes[0].sm_percent is None
    assert processes[0].unavailable["sm_percent"] == "no recent sample"


def test_process_lists_are_read_only_on_the_slow_cadence(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])]))
    collector.read(slow=True)
    before = driver.calls("nvmlDeviceGetComputeRunningProcesses_v3")

    driver.write(FakeState(gpus=[h100(0)]))
    _, processes = collector.read(slow=False)

    assert before >= 1
    assert driver.calls("nvmlDeviceGetComputeRunningProcesses_v3") == before
    assert [p.pid for p in processes] == [4242]


def test_r470_without_v3_process_calls_falls_back_to_v2(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid=4242, used_memory=5 * GIB)])]), profile="r470")

    _, processes = collector.read(slow=True)

    assert [(p.pid, p.gpu_memory_bytes) for p in processes] == [(4242, 5 * GIB)]


def test_r470_memory_comes_from_v1_where_used_includes_reserved(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, memory_used=10 * GIB)]), profile="r470")

    gpus, _ = collector.read(slow=True)

    assert gpus[0].memory_used_bytes == 10 * GIB + 512 * 1024**2
    assert gpus[0].memory_reserved_bytes is None
    assert gpus[0].unavailable["memory_reserved_bytes"] == NOT_IN_DRIVER


def test_r470_throttle_reasons_come_from_the_older_call(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, clocks_event_reasons=0x8)]), profile="r470")

    gpus, _ = collector.read(slow=True)

    assert gpus[0].throttle_reasons == ("hw_slowdown",)


def test_r470_has_no_gpm(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0)]), profile="r470")

    collector.read(slow=False)
    gpus, _ = collector.read(slow=False)

    assert gpus[0].sm_activity_percent is None
    assert gpus[0].unavailable["sm_activity_percent"] == NOT_IN_DRIVER


def test_r535_reads_processes_memory_v2_and_gpm(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid=4242, used_memory=GIB)])]), profile="r535")

    collector.read(slow=True)
    gpus, processes = collector.read(slow=True)

    assert gpus[0].memory_reserved_bytes == 512 * 1024**2
    assert gpus[0].sm_activity_percent == 63.5
    assert [p.pid for p in processes] == [4242]


def test_legacy_v1_process_call_is_used_when_versioned_ones_fail(fake_driver, collector):
    missing = {
        "nvmlDeviceGetComputeRunningProcesses_v3": "FUNCTION_NOT_FOUND",
        "nvmlDeviceGetComputeRunningProcesses_v2": "FUNCTION_NOT_FOUND",
    }
    fake_driver(FakeState(gpus=[h100(0, errors=missing, processes=[FakeProcess(pid=4242, used_memory=3 * GIB)])]))

    _, processes = collector.read(slow=True)

    assert [(p.pid, p.gpu_memory_bytes, p.kind) for p in processes] == [(4242, 3 * GIB, "compute")]


def test_no_gpus_is_an_empty_reading_not_an_error(fake_driver, collector):
    fake_driver(FakeState())

    gpus, processes = collector.read(slow=True)

    assert collector.driver.status == "ok"
    assert (gpus, processes) == ([], [])


def test_gpu_that_cannot_be_opened_is_an_error_card(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, errors={"*": "NO_PERMISSION"}), h100(1)]))

    gpus, _ = collector.read(slow=True)

    assert (gpus[0].state, gpus[0].reason) == ("error", "no permission to open this GPU")
    assert gpus[1].state == GPU_OK


def test_the_energy_counter_is_read_in_joules_on_the_slow_cadence(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0, energy_mj=15_636_002)]))
    gpus, _ = collector.read(slow=True)
    calls = driver.calls("nvmlDeviceGetTotalEnergyConsumption")

    driver.write(FakeState(gpus=[h100(0, energy_mj=15_652_002)]))
    between, _ = collector.read(slow=False)
    after, _ = collector.read(slow=True)

    assert (gpus[0].energy_j, calls) == (pytest.approx(15_636.002), 1)
    assert between[0].energy_j == pytest.approx(15_636.002)  # the slow reading, reused
    assert driver.calls("nvmlDeviceGetTotalEnergyConsumption") == 2
    assert after[0].energy_j == pytest.approx(15_652.002)
    assert "energy_j" not in after[0].unavailable


@pytest.mark.parametrize("architecture", [2, 4])  # Kepler, Pascal: the counter came with Volta
def test_a_gpu_older_than_volta_has_no_energy_counter_and_is_asked_once(fake_driver, collector, architecture):
    driver = fake_driver(FakeState(gpus=[h100(0, architecture=architecture)]))

    collector.read(slow=True)
    gpus, _ = collector.read(slow=True)

    assert (gpus[0].energy_j, gpus[0].unavailable["energy_j"]) == (None, UNSUPPORTED)
    assert driver.calls("nvmlDeviceGetTotalEnergyConsumption") == 1


@pytest.mark.parametrize("profile", ["r430", "r580"])
def test_every_driver_branch_answers_the_energy_counter(fake_driver, collector, profile):
    fake_driver(FakeState(gpus=[h100(0, energy_mj=1_000)]), profile=profile)

    gpus, _ = collector.read(slow=True)

    assert gpus[0].energy_j == pytest.approx(1.0)
