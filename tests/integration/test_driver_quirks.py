"""What real drivers do that a tidy fake would not: unreported process memory, the deprecated temperature call,
whole families without fan, power limit, ECC or PCIe counters, and the 20 ms PCIe throughput read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gputop.collect.nvml import NvmlCollector, device
from gputop.collect.sampler import SnapshotMaker
from gputop.document import snapshot_to_dict
from gputop.model import COMPUTE, COMPUTE_GRAPHICS, GRAPHICS, NOT_IN_DRIVER, NOT_REPORTED, UNSUPPORTED
from tests.fakenvml.state import NVML_VALUE_NOT_AVAILABLE, FakeProcess, FakeState
from tests.machines import GIB, h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def collector() -> Iterator[NvmlCollector]:
    nvml = NvmlCollector(retry_lost_after_s=0.0)
    yield nvml
    nvml.close()


# -- a process's memory the driver does not report (WDDM, some containers, vGPU) ---------------------------------


@pytest.mark.parametrize(("profile", "variant"), [("r550", 3), ("r470", 2), ("r430", 1)])
def test_unreported_process_memory_is_null_with_its_reason_on_every_process_call(
    fake_driver, collector, profile, variant
):
    processes = [
        FakeProcess(101, NVML_VALUE_NOT_AVAILABLE, "compute"),
        FakeProcess(102, NVML_VALUE_NOT_AVAILABLE, "compute"),
        FakeProcess(102, NVML_VALUE_NOT_AVAILABLE, "graphics"),
        FakeProcess(103, 2 * GIB, "graphics"),
    ]
    fake_driver(FakeState(gpus=[h100(0, processes=processes)]), profile=profile)

    _, rows = collector.read(slow=True)

    assert collector._variants.processes == {COMPUTE: variant, GRAPHICS: variant}
    by_pid = {p.pid: p for p in rows}
    assert [(p.pid, p.kind) for p in rows] == [(101, COMPUTE), (102, COMPUTE_GRAPHICS), (103, GRAPHICS)]
    for pid in (101, 102):
        assert by_pid[pid].gpu_memory_bytes is None  # never 2**64 - 1 bytes, never 0
        assert by_pid[pid].unavailable["gpu_memory_bytes"] == NOT_REPORTED == "not reported by the driver"
    assert by_pid[103].gpu_memory_bytes == 2 * GIB
    assert "gpu_memory_bytes" not in by_pid[103].unavailable


def test_one_list_reporting_the_memory_is_enough(fake_driver, collector):
    processes = [FakeProcess(7, NVML_VALUE_NOT_AVAILABLE, "graphics"), FakeProcess(7, 3 * GIB, "compute")]
    fake_driver(FakeState(gpus=[h100(0, processes=processes)]))

    _, rows = collector.read(slow=True)

    assert [(p.kind, p.gpu_memory_bytes, dict(p.unavailable).get("gpu_memory_bytes")) for p in rows] == [
        (COMPUTE_GRAPHICS, 3 * GIB, None)
    ]


def test_unreported_process_memory_in_the_json_row(fake_driver, spawn):
    proc = spawn()
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(proc.pid, NVML_VALUE_NOT_AVAILABLE, "compute")])]))
    maker = SnapshotMaker()
    try:
        doc = snapshot_to_dict(maker.one_shot())
    finally:
        maker.close()

    (row,) = doc["processes"]
    assert (row["pid"], row["gpu_memory_bytes"]) == (proc.pid, None)
    assert row["unavailable"]["gpu_memory_bytes"] == "not reported by the driver"


# -- temperature: nvmlDeviceGetTemperatureV and the deprecated nvmlDeviceGetTemperature --------------------------


@pytest.mark.parametrize(
    ("profile", "used", "unused"),
    [
        ("r580", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),  # both exported: the newer one
        ("next", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),  # the deprecated one is gone
        ("r550", "nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"),  # before R555: the old one only
        ("r470", "nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"),
    ],
)
def test_temperature_comes_from_whichever_call_the_driver_exports(fake_driver, collector, profile, used, unused):
    driver = fake_driver(FakeState(gpus=[h100(0, temperature_c=57)]), profile=profile)

    for _ in range(3):
        gpus, _ = collector.read(slow=False)
        assert gpus[0].temperature_c == 57
        assert "temperature_c" not in gpus[0].unavailable

    assert driver.calls(used) == 3
    assert driver.calls(unused) == 0  # absent ones are never called: pynvml finds no symbol


def test_temperature_not_supported_is_unsupported_not_a_fallback_to_zero(fake_driver, collector):
    errors = {"nvmlDeviceGetTemperatureV": "NOT_SUPPORTED", "nvmlDeviceGetTemperature": "NOT_SUPPORTED"}
    fake_driver(FakeState(gpus=[h100(0, errors=errors)]), profile="r580")

    gpus, _ = collector.read(slow=False)

    assert gpus[0].temperature_c is None
    assert gpus[0].unavailable["temperature_c"] == UNSUPPORTED


# -- whole families without a fan, a power limit, ECC or PCIe counters: asked once ------------------------------

FAMILY_GAPS = {
    "nvmlDeviceGetFanSpeed": ("fan_percent",),
    "nvmlDeviceGetPowerUsage": ("power_w",),
    "nvmlDeviceGetEnforcedPowerLimit": ("power_limit_w",),
    "nvmlDeviceGetClockInfo": ("clock_sm_mhz", "clock_mem_mhz"),
    "nvmlDeviceGetMaxClockInfo": ("clock_sm_max_mhz", "clock_mem_max_mhz"),
    "nvmlDeviceGetTotalEccErrors": ("ecc_uncorrected_volatile",),
    "nvmlDeviceGetEccMode": ("ecc_enabled",),
    "nvmlDeviceGetPcieThroughput": ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"),
    "nvmlDeviceGetCurrPcieLinkGeneration": ("pcie_link_gen",),
    "nvmlDeviceGetMaxPcieLinkWidth": ("pcie_link_width_max",),
}


def test_calls_a_family_lacks_are_shown_as_unsupported_and_not_asked_again(fake_driver, collector, monkeypatch):
    monkeypatch.setattr(device, "PCIE_THROUGHPUT_REUSE_S", 0.0)  # every slow tick would read PCIe again
    errors = dict.fromkeys(FAMILY_GAPS, "NOT_SUPPORTED")
    driver = fake_driver(FakeState(gpus=[h100(0, errors=errors), h100(1, errors=errors)]))

    collector.read(slow=True)
    first = {name: driver.calls(name) for name in FAMILY_GAPS}
    for _ in range(4):
        gpus, _ = collector.read(slow=True)

    assert {name: driver.calls(name) for name in FAMILY_GAPS} == first
    # one failed call per GPU and argument: SM and memory clocks, RX and TX are asked separately
    assert first["nvmlDeviceGetFanSpeed"] == 2
    assert first["nvmlDeviceGetClockInfo"] == first["nvmlDeviceGetPcieThroughput"] == 4
    for gpu in gpus:
        for keys in FAMILY_GAPS.values():
            for key in keys:
                assert getattr(gpu, key) is None, key
                assert gpu.unavailable[key] == UNSUPPORTED, key
        assert gpu.temperature_c == 61 + gpu.index  # the rest still reads


def test_a_call_missing_from_the_driver_is_not_in_driver_and_asked_once(fake_driver, collector):
    driver = fake_driver(FakeState(gpus=[h100(0)]), profile="r470")

    for _ in range(3):
        gpus, _ = collector.read(slow=False)

    assert gpus[0].unavailable["memory_reserved_bytes"] == NOT_IN_DRIVER
    assert driver.calls("nvmlDeviceGetMemoryInfo_v2") == 0
    assert driver.calls("nvmlDeviceGetCurrentClocksEventReasons") == 0


# -- PCIe throughput: 20 ms a call on a real H100 ---------------------------------------------------------------


def test_once_reads_pcie_throughput_once_per_gpu_and_direction(fake_driver):
    driver = fake_driver(FakeState(gpus=[h100(0), h100(1)]))
    maker = SnapshotMaker()
    try:
        snap = maker.one_shot()
    finally:
        maker.close()

    assert driver.calls("nvmlDeviceGetPcieThroughput") == 4  # 2 GPUs x (RX, TX), not twice that
    assert [g.pcie_rx_bytes_per_s for g in snap.gpus] == [48_000 * 1024] * 2
    assert driver.calls("nvmlDeviceGetEnforcedPowerLimit") == 4  # the rest of the slow reading is fresh


def test_pcie_throughput_is_read_again_once_the_reading_is_older_than_the_reuse_window(
    fake_driver, collector, monkeypatch
):
    driver = fake_driver(FakeState(gpus=[h100(0)]))
    collector.read(slow=True)
    collector.read(slow=True)
    assert driver.calls("nvmlDeviceGetPcieThroughput") == 2

    driver.write(FakeState(gpus=[h100(0, pcie_rx_kbps=7)]))
    monkeypatch.setattr(device, "PCIE_THROUGHPUT_REUSE_S", 0.0)
    gpus, _ = collector.read(slow=True)

    assert driver.calls("nvmlDeviceGetPcieThroughput") == 4
    assert gpus[0].pcie_rx_bytes_per_s == 7 * 1024
