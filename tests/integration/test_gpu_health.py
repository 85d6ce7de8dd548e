"""GPU health end to end through the fake driver and the real pynvml: an Xid written into the driver's state
arrives as an NVML event on the watcher's thread, turns the GPU critical, is named by the advisor's finding and is
counted by the exporter; what a GPU or driver lacks is N/A with its reason."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gputop.advisor.rules.gpu import gpu_unhealthy
from gputop.advisor.window import AdvisorConfig
from gputop.collect.nvml import NvmlCollector
from gputop.export.metrics import snapshot_families
from gputop.model import (
    HEALTH_CRITICAL,
    HEALTH_OK,
    HEALTH_WARN,
    NOT_IN_DRIVER,
    UNSUPPORTED,
    DriverInfo,
    Gpu,
    Snapshot,
)
from tests.advisor.build import sample, view, window
from tests.factories import host_info, wait_until
from tests.fakenvml.build import call_count
from tests.fakenvml.state import FakeState
from tests.machines import h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def collector() -> Iterator[NvmlCollector]:
    nvml = NvmlCollector(retry_lost_after_s=0.0)
    yield nvml
    nvml.close()


def health_of(collector: NvmlCollector, index: int = 0) -> Gpu:
    gpus, _ = collector.read(slow=True)
    assert gpus[index].health is not None
    return gpus[index]


def critical(collector: NvmlCollector) -> Gpu | None:
    gpu = health_of(collector)
    return gpu if gpu.health is not None and gpu.health.state == HEALTH_CRITICAL else None


def test_an_xid_written_to_the_driver_turns_the_gpu_critical_and_names_it(fake_driver, collector):
    state = FakeState(gpus=[h100(0)])
    driver = fake_driver(state)
    assert health_of(collector).health.state == HEALTH_OK  # type: ignore[union-attr]

    state.gpus[0].xids = [48]
    driver.write(state)
    gpu = wait_until(lambda: critical(collector), "GPU 0 critical after Xid 48")

    health = gpu.health
    assert health is not None
    assert [(x.xid, x.count) for x in health.xids] == [(48, 1)]
    assert health.causes[0].startswith("Xid 48: double-bit (uncorrectable) ECC error; drain the GPU and reset it")


def test_xids_from_before_gputop_watched_are_not_counted(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, xids=[79])]))

    gpu = health_of(collector)

    assert gpu.health is not None
    assert (gpu.health.state, gpu.health.xids) == (HEALTH_OK, ())


def test_the_advisor_names_the_xid_of_the_gpu_a_process_holds(fake_driver, collector):
    state = FakeState(gpus=[h100(0)])
    driver = fake_driver(state)
    collector.read(slow=True)
    state.gpus[0].xids = [95]
    driver.write(state)
    gpu = wait_until(lambda: critical(collector), "GPU 0 critical after Xid 95")

    finding = gpu_unhealthy(window(lambda t: sample(t, view(), gpus=(gpu,))), AdvisorConfig(window_s=10.0))

    assert finding is not None
    assert finding.severity == "critical"
    assert finding.title == "GPU 0 is failing: Xid 95, uncontained ECC error: every application on the GPU is affected"
    assert finding.action.startswith("Drain the GPU and reset it")


def test_the_exporter_counts_the_xid_and_reports_the_state(fake_driver, collector):
    state = FakeState(gpus=[h100(0)])
    driver = fake_driver(state)
    collector.read(slow=True)
    state.gpus[0].xids = [13, 13]
    driver.write(state)

    def warned() -> Gpu | None:
        gpu = health_of(collector)
        return gpu if gpu.health and sum(x.count for x in gpu.health.xids) == 2 else None

    gpu = wait_until(warned, "two Xid 13 counted")
    samples = {
        (s.name, s.labels.get("xid"), s.labels.get("kind")): s.value
        for family in snapshot_families(snapshot([gpu]))
        for s in family.samples
    }

    assert samples[("gputop_gpu_health", None, None)] == 1  # warn: the application's own error
    assert samples[("gputop_gpu_xid_errors_total", "13", None)] == 2
    assert samples[("gputop_gpu_remapped_rows", None, "correctable")] == 0
    assert ("gputop_gpu_retired_pages", None, None) not in samples  # an H100 retires no pages: no sample, not 0
    assert gpu.health is not None and gpu.health.state == HEALTH_WARN


def test_what_the_gpu_lacks_is_unsupported_never_zero(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0), h100(1, row_remapping=False, page_retirement=True, retired_double_bit=2)]))

    gpus, _ = collector.read(slow=True)

    hopper, older = gpus[0].health, gpus[1].health
    assert hopper is not None and older is not None
    assert hopper.retired_pages_double_bit is None
    assert hopper.unavailable["retired_pages_double_bit"] == UNSUPPORTED
    assert hopper.remapped_rows_correctable == 0
    assert older.remapped_rows_failed is None
    assert older.unavailable["remapped_rows_failed"] == UNSUPPORTED
    assert older.retired_pages_double_bit == 2


def test_a_driver_without_the_event_wait_leaves_xids_na_and_the_rest_read(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, page_retirement=True, pcie_replays=3)]), profile="r430")

    def watched() -> Gpu | None:
        gpu = health_of(collector)
        return gpu if gpu.health and "xids" in gpu.health.unavailable else None

    gpu = wait_until(watched, "the reason Xids are not watched")

    assert gpu.health is not None
    assert gpu.health.unavailable["xids"] == NOT_IN_DRIVER
    assert gpu.health.unavailable["remapped_rows_correctable"] == NOT_IN_DRIVER
    assert (gpu.health.pcie_replays, gpu.health.retired_pages_pending) == (3, False)
    assert (gpu.temperature_c, gpu.power_w) == (61, pytest.approx(512.345))
    assert gpu.health.state == HEALTH_OK


def test_a_gpu_that_does_not_report_xids_says_so(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, event_types=0x1)]))

    gpu = health_of(collector)

    assert gpu.health is not None and gpu.health.unavailable["xids"] == UNSUPPORTED


def test_an_event_wait_times_out_with_nvml_timeout_and_sleeps_until_then(fake_driver):
    import pynvml

    driver = fake_driver(FakeState(gpus=[h100(0)]))
    pynvml.nvmlInit()
    try:
        events = pynvml.nvmlEventSetCreate()
        pynvml.nvmlDeviceRegisterEvents(pynvml.nvmlDeviceGetHandleByIndex(0), 0x8, events)
        driver.lib.fakenvmlResetCallCounts()
        started = time.monotonic()
        with pytest.raises(pynvml.NVMLError_Timeout):
            pynvml.nvmlEventSetWait_v2(events, 200)
        assert time.monotonic() - started >= 0.2
        # As a real driver's wait blocks in the kernel, the fake's sleeps until the state file changes or the time
        # is up: one look before, one after. Looking every 5 ms cost the waiting process 1.2 % of a core, which
        # every CPU figure of gputop against the fake counted as gputop's own.
        assert call_count(driver.lib, "nvmlEventSetWait_v2") <= 3
        pynvml.nvmlEventSetFree(events)
    finally:
        pynvml.nvmlShutdown()


def snapshot(gpus: list[Gpu]) -> Snapshot:
    return Snapshot(time=time.time(), host=host_info(), driver=DriverInfo("ok"), gpus=tuple(gpus))


def test_the_xids_counted_per_gpu_are_bounded_and_the_newest_kept(fake_driver, collector):
    from gputop.collect.nvml.health import MAX_XIDS_KEPT

    state = FakeState(gpus=[h100(0)])
    driver = fake_driver(state)
    collector.read(slow=True)
    many = [1000 + n for n in range(MAX_XIDS_KEPT + 8)]
    state.gpus[0].xids = many
    driver.write(state)

    def newest_counted() -> Gpu | None:
        gpu = health_of(collector)
        return gpu if gpu.health and many[-1] in {x.xid for x in gpu.health.xids} else None

    gpu = wait_until(newest_counted, "the last of the Xids counted")

    assert gpu.health is not None
    assert len(gpu.health.xids) == MAX_XIDS_KEPT
    assert {x.xid for x in gpu.health.xids} == set(many[-MAX_XIDS_KEPT:])
