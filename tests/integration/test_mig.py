"""MIG against the fake driver, through the real pynvml: the fake's MIG calls, then the collector's instances,
their processes (as root and as another user), and GPM per instance."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pynvml
import pytest

from gputop.collect.nvml import NvmlCollector
from gputop.model import (
    INVALID,
    MEASURING,
    MIG_DISABLED,
    MIG_ENABLED,
    NOT_IN_DRIVER,
    NOT_IN_MIG_MODE,
    NOT_REPORTED,
    UNSUPPORTED,
)
from tests.fakenvml.state import NVML_VALUE_NOT_AVAILABLE, FakeMigInstance, FakeState
from tests.machines import GIB, h100
from tests.mig_machines import a100_mig, h100_mig, mig_box

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def collector() -> Iterator[NvmlCollector]:
    nvml = NvmlCollector(retry_lost_after_s=0.0)
    yield nvml
    nvml.close()


def two_readings(nvml: NvmlCollector):
    nvml.read(slow=True)
    time.sleep(0.01)
    return nvml.read(slow=True)


def code(exc_info: pytest.ExceptionInfo[pynvml.NVMLError]) -> int:
    return int(exc_info.value.value)


# -- the fake's MIG calls -----------------------------------------------------------------------------------------


def test_the_fake_hands_out_mig_handles_distinct_from_gpu_handles(fake_driver):
    fake_driver(mig_box())
    pynvml.nvmlInit()
    try:
        parent = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetMigMode(parent) == [1, 1]
        assert pynvml.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
        handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
        assert pynvml.nvmlDeviceIsMigDeviceHandle(handle).value == 1
        assert pynvml.nvmlDeviceIsMigDeviceHandle(parent).value == 0
        back = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        assert pynvml.nvmlDeviceGetIndex(back) == 0
        assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3 MIG 2g.20gb"
        assert pynvml.nvmlDeviceGetUUID(handle).startswith("MIG-")
        assert (pynvml.nvmlDeviceGetGpuInstanceId(handle), pynvml.nvmlDeviceGetComputeInstanceId(handle)) == (5, 0)
        attributes = pynvml.nvmlDeviceGetAttributes_v2(handle)
        assert (attributes.multiprocessorCount, attributes.gpuInstanceSliceCount) == (32, 2)
        assert pynvml.nvmlDeviceGetAttributes_v2(parent).multiprocessorCount == 132
        assert pynvml.nvmlDeviceGetMemoryInfo(handle).used == 6 * GIB
        with pytest.raises(pynvml.NVMLError) as empty:
            pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 4)
        assert code(empty) == pynvml.NVML_ERROR_NOT_FOUND
        for h in (parent, handle):  # no utilization in MIG mode, on the GPU or on an instance
            with pytest.raises(pynvml.NVMLError) as refused:
                pynvml.nvmlDeviceGetUtilizationRates(h)
            assert code(refused) == pynvml.NVML_ERROR_NOT_SUPPORTED
        with pytest.raises(pynvml.NVMLError) as no_instance:
            pynvml.nvmlDeviceGetGpuInstanceId(parent)
        assert code(no_instance) == pynvml.NVML_ERROR_NOT_SUPPORTED
        off = pynvml.nvmlDeviceGetHandleByIndex(1)
        assert pynvml.nvmlDeviceGetMigMode(off) == [0, 0]
        with pytest.raises(pynvml.NVMLError) as off_slot:
            pynvml.nvmlDeviceGetMigDeviceHandleByIndex(off, 0)
        assert code(off_slot) == pynvml.NVML_ERROR_NOT_FOUND
    finally:
        pynvml.nvmlShutdown()


@pytest.mark.parametrize("answer", ["empty", "NO_PERMISSION"])
def test_the_parents_process_list_is_the_aggregate_for_a_privileged_caller_only(fake_driver, answer):
    driver = fake_driver(mig_box(privileged=True, mig_unprivileged_processes=answer))
    pynvml.nvmlInit()
    try:
        parent = pynvml.nvmlDeviceGetHandleByIndex(0)
        aggregate = pynvml.nvmlDeviceGetComputeRunningProcesses_v3(parent)
        assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in aggregate] == [
            (4242, 1, 0),
            (5151, 5, 0),
            (5152, 5, 0),
        ]
        driver.write(mig_box(privileged=False, mig_unprivileged_processes=answer))
        if answer == "empty":
            assert pynvml.nvmlDeviceGetComputeRunningProcesses_v3(parent) == []
        else:
            with pytest.raises(pynvml.NVMLError) as refused:
                pynvml.nvmlDeviceGetComputeRunningProcesses_v3(parent)
            assert code(refused) == pynvml.NVML_ERROR_NO_PERMISSION
        instance = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)
        own = pynvml.nvmlDeviceGetComputeRunningProcesses_v3(instance)
        assert [(p.pid, p.gpuInstanceId) for p in own] == [(5151, 5), (5152, 5)]
    finally:
        pynvml.nvmlShutdown()


# -- the collector ------------------------------------------------------------------------------------------------


def test_instances_are_read_by_slot_with_their_facts_memory_and_activity(fake_driver, collector):
    fake_driver(mig_box())

    gpus, _ = two_readings(collector)

    gpu = gpus[0]
    assert (gpu.mig_mode, gpu.mig_pending_mode) == (MIG_ENABLED, MIG_ENABLED)
    assert [(m.index, m.gpu_instance_id, m.compute_instance_id, m.profile) for m in gpu.mig] == [
        (0, 1, 0, "3g.40gb"),
        (1, 5, 0, "2g.20gb"),
        (2, 13, 0, "1g.10gb"),
    ]
    first = gpu.mig[0]
    assert first.uuid == "MIG-0a1b2c3d-0000-4000-8000-000000000000"
    assert first.multiprocessor_count == 60
    assert (first.memory_total_bytes, first.memory_used_bytes) == (40 * GIB - 768 * 1024**2, 30 * GIB)
    assert (first.sm_activity_percent, first.tensor_activity_percent) == (71.5, 48.0)
    assert dict(first.unavailable) == {}
    # NVML has no utilization in MIG mode: N/A, with the reason, not an error.
    for name in ("utilization_gpu_percent", "utilization_memory_percent", "sm_activity_percent"):
        assert getattr(gpu, name) is None
        assert gpu.unavailable[name] == NOT_IN_MIG_MODE
    other = gpus[1]
    assert (other.mig_mode, other.mig, other.utilization_gpu_percent) == (MIG_DISABLED, (), 87)


def test_an_instance_reading_out_of_range_is_null_with_the_drivers_reason(fake_driver, collector):
    gpu = h100_mig(0)
    gpu.mig[0].gpm_sm_util = 150.0
    gpu.mig[1].memory_used = gpu.mig[1].memory_total + GIB
    fake_driver(FakeState(gpus=[gpu]))

    gpus, _ = two_readings(collector)

    first, second, _ = gpus[0].mig
    assert (first.sm_activity_percent, first.unavailable["sm_activity_percent"]) == (None, INVALID)
    assert first.tensor_activity_percent == 48.0
    assert (second.memory_used_bytes, second.unavailable["memory_used_bytes"]) == (None, INVALID)
    assert second.memory_total_bytes == 20 * GIB - 512 * 1024**2


def test_activity_is_measuring_at_the_first_reading(fake_driver, collector):
    fake_driver(mig_box())

    gpus, _ = collector.read(slow=True)

    assert gpus[0].mig[0].sm_activity_percent is None
    assert gpus[0].mig[0].unavailable["sm_activity_percent"] == MEASURING


def test_root_sees_the_aggregate_with_each_processs_instance(fake_driver, collector):
    driver = fake_driver(mig_box(privileged=True))

    _, processes = two_readings(collector)

    on_mig = [(p.pid, p.mig_index, p.gpu_instance_id, p.compute_instance_id) for p in processes if p.gpu_index == 0]
    assert on_mig == [(4242, 0, 1, 0), (5151, 1, 5, 0), (5152, 1, 5, 0)]
    assert processes[0].gpu_memory_bytes == 29 * GIB
    assert processes[0].unavailable["sm_percent"] == NOT_IN_MIG_MODE
    assert collector.notices == []
    # The aggregate answered, so the instances' own lists were not asked: per tick, pynvml sizes and fills GPU 0's
    # list (two calls) and finds GPU 1's empty (one).
    assert driver.calls("nvmlDeviceGetComputeRunningProcesses_v3") == 6


@pytest.mark.parametrize("answer", ["empty", "NO_PERMISSION"])
def test_another_user_sees_the_processes_through_each_instance(fake_driver, collector, answer):
    fake_driver(mig_box(privileged=False, mig_unprivileged_processes=answer))

    _, processes = two_readings(collector)

    on_mig = [(p.pid, p.mig_index, p.gpu_instance_id, p.gpu_memory_bytes) for p in processes if p.gpu_index == 0]
    assert on_mig == [(4242, 0, 1, 29 * GIB), (5151, 1, 5, 3 * GIB), (5152, 1, 5, 2 * GIB + 512 * 1024**2)]
    assert collector.notices == []


def test_a_refusal_everywhere_is_a_notice(fake_driver, collector):
    state = mig_box(privileged=False, mig_unprivileged_processes="NO_PERMISSION")
    state.gpus[0].errors["nvmlDeviceGetComputeRunningProcesses"] = "NO_PERMISSION"
    fake_driver(state)

    _, processes = two_readings(collector)

    assert [p for p in processes if p.gpu_index == 0] == []
    assert collector.notices == [
        "GPU 0: no permission to list the processes of its MIG instances (run as root to see them)"
    ]


def test_ampere_has_no_gpm_and_says_so(fake_driver, collector):
    fake_driver(FakeState(gpus=[a100_mig(0)], privileged=False))

    gpus, processes = two_readings(collector)

    assert [(m.index, m.profile, m.memory_used_bytes) for m in gpus[0].mig] == [
        (0, "3g.20gb", 9 * GIB),
        (2, "3g.20gb", GIB),
    ]
    for instance in gpus[0].mig:
        assert instance.sm_activity_percent is None and instance.tensor_activity_percent is None
        assert instance.unavailable["sm_activity_percent"] == UNSUPPORTED
        assert instance.unavailable["tensor_activity_percent"] == UNSUPPORTED
    assert [(p.pid, p.mig_index) for p in processes] == [(7001, 0), (7002, 2)]


def test_a_driver_without_gpm_says_it_is_not_in_this_driver(fake_driver, collector):
    fake_driver(mig_box(), profile="r470")

    gpus, processes = two_readings(collector)

    assert gpus[0].mig[0].unavailable["sm_activity_percent"] == NOT_IN_DRIVER
    assert gpus[0].mig[0].memory_used_bytes == 30 * GIB
    assert [(p.pid, p.gpu_instance_id) for p in processes if p.gpu_index == 0] == [(4242, 1), (5151, 5), (5152, 5)]


def test_a_gpu_without_mig_has_no_mode(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, mig_supported=False)]))

    gpus, _ = collector.read(slow=True)

    assert (gpus[0].mig_mode, gpus[0].mig) == (None, ())
    assert gpus[0].unavailable["mig_mode"] == UNSUPPORTED


def test_instances_created_and_destroyed_are_seen_on_the_next_slow_reading(fake_driver, collector):
    state = FakeState(gpus=[h100_mig(0)])
    driver = fake_driver(state)
    two_readings(collector)
    state.gpus[0].mig = [state.gpus[0].mig[2], FakeMigInstance(slot=4, gpu_instance_id=9, profile="1g.10gb")]
    driver.write(state)

    gpus, processes = collector.read(slow=True)

    assert [(m.index, m.gpu_instance_id) for m in gpus[0].mig] == [(2, 13), (4, 9)]
    assert gpus[0].mig[0].sm_activity_percent == 0.0  # its GPM sample was kept
    assert gpus[0].mig[1].unavailable["sm_activity_percent"] == MEASURING
    assert processes == []


def test_a_pending_mode_change_is_read(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, mig_pending_mode=True)]))

    gpus, _ = collector.read(slow=True)

    assert (gpus[0].mig_mode, gpus[0].mig_pending_mode, gpus[0].mig) == (MIG_DISABLED, MIG_ENABLED, ())


@pytest.mark.parametrize("privileged", [True, False], ids=["parent-list", "per-instance-lists"])
def test_a_mig_process_whose_memory_the_driver_does_not_report_is_null_with_the_reason(
    fake_driver, collector, privileged
):
    """NVML_VALUE_NOT_AVAILABLE (all bits set) on a MIG instance's process, whether the list came from the parent
    (as root) or from the instance's own handle (as another user): never 16 EiB, never a bare null."""
    state = mig_box(privileged=privileged)
    state.gpus[0].mig[0].processes[0].used_memory = NVML_VALUE_NOT_AVAILABLE
    fake_driver(state)

    _, processes = two_readings(collector)

    (row,) = [p for p in processes if p.pid == 4242]
    assert (row.mig_index, row.gpu_memory_bytes) == (0, None)
    assert row.unavailable["gpu_memory_bytes"] == NOT_REPORTED
