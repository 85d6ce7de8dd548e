"""Tests of the fake NVIDIA driver itself, driven through the real pynvml module.

Everything else in the suite trusts this library to behave like a real ``libnvidia-ml.so.1``;
these tests pin that behaviour down, one NVML semantic per test.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import pynvml
import pytest

from tests.fakenvml.build import LIBRARY_NAME, PROFILES, build, call_count, use_in_process
from tests.fakenvml.state import (
    STATE_ENV_VAR,
    FakeGpu,
    FakeProcess,
    FakeSample,
    FakeState,
    render_state,
    write_state,
)

NO_INSTANCE = 0xFFFFFFFF


class ProcessInfoV1(ctypes.Structure):
    """The legacy ``nvmlProcessInfo_v1_t``, which pynvml no longer defines."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


@dataclass
class Fake:
    """A per-test handle on the fake driver: its state file and the libraries loaded for it."""

    path: pathlib.Path
    libs: list[ctypes.CDLL] = field(default_factory=list)

    def write(self, state: FakeState) -> None:
        """Replace the fake's state; the library notices at its next call."""
        write_state(self.path, state)

    def start(self, state: FakeState | None = None, profile: str = "r550", init: bool = True) -> ctypes.CDLL:
        """Write ``state`` (if given), point pynvml at ``profile`` and optionally nvmlInit.

        Returns:
            The loaded fake library.
        """
        if state is not None:
            self.write(state)
        lib = use_in_process(profile)
        self.libs.append(lib)
        if init:
            pynvml.nvmlInit()
        return lib

    @property
    def lib(self) -> ctypes.CDLL:
        """The library loaded last."""
        return self.libs[-1]


@pytest.fixture
def fake(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """Give the test its own state file, and leave NVML shut down and pynvml untouched after."""
    path = tmp_path / "nvml-state"
    monkeypatch.setenv(STATE_ENV_VAR, str(path))
    saved = (pynvml.nvmlLib, pynvml._nvmlLib_refcount)
    handle = Fake(path)
    yield handle
    for lib in handle.libs:
        # Bounded: an injected nvmlShutdown error would otherwise loop forever.
        for _ in range(100):
            if lib.nvmlShutdown() != pynvml.NVML_SUCCESS:
                break
    with pynvml.libLoadLock:
        pynvml.nvmlLib, pynvml._nvmlLib_refcount = saved
        pynvml._nvmlGetFunctionPointer_cache.clear()


def one_gpu(**fields: object) -> FakeState:
    """A state with a single GPU whose given fields differ from the defaults."""
    return FakeState(gpus=[FakeGpu(**fields)])  # type: ignore[arg-type]


def error_code(exc_info: pytest.ExceptionInfo[pynvml.NVMLError]) -> int:
    """The NVML return code carried by a raised pynvml error."""
    return exc_info.value.value


# --- round trips -------------------------------------------------------------------------------


def test_every_gpu_field_round_trips(fake: Fake) -> None:
    gpu = FakeGpu(
        name="NVIDIA A100-SXM4-40GB (fake #1) ~!@$%^&*",
        uuid="GPU-12345678-9abc-def0-1234-56789abcdef0",
        memory_total=42_949_672_960,
        memory_reserved=123_456_789,
        memory_used=9_876_543_210,
        util_gpu=87,
        util_memory=45,
        temperature_c=71,
        power_mw=312_345,
        power_limit_mw=400_000,
        fan_percent=63,
        pstate=2,
        persistence_mode=0,
        clock_sm_mhz=1410,
        clock_mem_mhz=1215,
        clock_sm_max_mhz=1500,
        clock_mem_max_mhz=1300,
        pcie_tx_kbps=123_456,
        pcie_rx_kbps=654_321,
        clocks_event_reasons=0x8000_0000_0000_0044,
        ecc_uncorrected_volatile=3,
    )
    fake.start(FakeState(gpus=[FakeGpu(), gpu]))
    h = pynvml.nvmlDeviceGetHandleByIndex(1)

    assert pynvml.nvmlDeviceGetCount() == 2
    assert pynvml.nvmlDeviceGetIndex(h) == 1
    assert pynvml.nvmlDeviceGetName(h) == gpu.name
    assert pynvml.nvmlDeviceGetUUID(h) == gpu.uuid
    util = pynvml.nvmlDeviceGetUtilizationRates(h)
    assert (util.gpu, util.memory) == (87, 45)
    assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 71
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 312_345
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h) == 400_000
    assert pynvml.nvmlDeviceGetFanSpeed(h) == 63
    assert pynvml.nvmlDeviceGetPerformanceState(h) == 2
    assert pynvml.nvmlDeviceGetPersistenceMode(h) == pynvml.NVML_FEATURE_DISABLED
    assert pynvml.nvmlDeviceGetPersistenceMode(pynvml.nvmlDeviceGetHandleByIndex(0)) == pynvml.NVML_FEATURE_ENABLED
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1410
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 1410
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM) == 1215
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM) == 1500
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 1500
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM) == 1300
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES) == 123_456
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES) == 654_321
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) == 0x8000_0000_0000_0044
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0x8000_0000_0000_0044
    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert pynvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, pynvml.NVML_VOLATILE_ECC) == 3
    assert pynvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, pynvml.NVML_AGGREGATE_ECC) == 3
    corrected = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
    assert pynvml.nvmlDeviceGetTotalEccErrors(h, corrected, pynvml.NVML_VOLATILE_ECC) == 0
    mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert (mem.total, mem.reserved, mem.used) == (42_949_672_960, 123_456_789, 9_876_543_210)


def test_system_fields_round_trip(fake: Fake) -> None:
    fake.start(FakeState(driver_version="999.1.2 beta", nvml_version="13.999.1.2", cuda_version=13000))
    assert pynvml.nvmlSystemGetDriverVersion() == "999.1.2 beta"
    assert pynvml.nvmlSystemGetNVMLVersion() == "13.999.1.2"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 13000
    assert pynvml.nvmlSystemGetCudaDriverVersion_v2() == 13000
    assert pynvml.nvmlDeviceGetCount() == 0


@pytest.mark.parametrize(
    ("profile", "driver", "nvml", "cuda"),
    [
        ("r470", "470.239.06", "11.470.239.06", 11040),
        ("r535", "535.183.01", "12.535.183.01", 12020),
        ("r550", "550.90.07", "12.550.90.07", 12040),
    ],
)
def test_versions_default_to_the_profile(fake: Fake, profile: str, driver: str, nvml: str, cuda: int) -> None:
    fake.start(FakeState(), profile=profile)
    assert pynvml.nvmlSystemGetDriverVersion() == driver
    assert pynvml.nvmlSystemGetNVMLVersion() == nvml
    assert pynvml.nvmlSystemGetCudaDriverVersion() == cuda


def test_processes_round_trip_split_by_kind(fake: Fake) -> None:
    fake.start(
        one_gpu(
            processes=[
                FakeProcess(pid=100, used_memory=1 << 30),
                FakeProcess(pid=200, used_memory=2 << 30, kind="graphics"),
                FakeProcess(pid=300, used_memory=3 << 30, kind="compute"),
            ]
        )
    )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    compute = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    graphics = pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
    assert [(p.pid, p.usedGpuMemory) for p in compute] == [(100, 1 << 30), (300, 3 << 30)]
    assert [(p.pid, p.usedGpuMemory) for p in graphics] == [(200, 2 << 30)]
    instances = {(p.gpuInstanceId, p.computeInstanceId) for p in compute + graphics}
    assert instances == {(NO_INSTANCE, NO_INSTANCE)}
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v2(h)] == [100, 300]
    assert [p.pid for p in pynvml.nvmlDeviceGetGraphicsRunningProcesses_v2(h)] == [200]


def test_no_state_file_means_no_gpus(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.start()  # the fixture's path was never written
    assert pynvml.nvmlDeviceGetCount() == 0
    monkeypatch.delenv(STATE_ENV_VAR)
    assert pynvml.nvmlDeviceGetCount() == 0
    assert pynvml.nvmlSystemGetDriverVersion() == "550.90.07"


# --- error injection ---------------------------------------------------------------------------


def test_per_gpu_function_error_hits_only_that_gpu(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu(), FakeGpu(errors={"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"})]))
    assert pynvml.nvmlDeviceGetFanSpeed(pynvml.nvmlDeviceGetHandleByIndex(0)) == 0
    h1 = pynvml.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetFanSpeed(h1)
    assert pynvml.nvmlDeviceGetTemperature(h1, pynvml.NVML_TEMPERATURE_GPU) == 35


def test_unversioned_error_key_covers_every_version(fake: Fake) -> None:
    fake.start(one_gpu(errors={"nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION"}))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    for call in (
        pynvml.nvmlDeviceGetComputeRunningProcesses_v2,
        pynvml.nvmlDeviceGetComputeRunningProcesses_v3,
    ):
        with pytest.raises(pynvml.NVMLError_NoPermission):
            call(h)
    assert pynvml.nvmlDeviceGetGraphicsRunningProcesses(h) == []


def test_versioned_error_key_hits_only_that_version(fake: Fake) -> None:
    fake.start(one_gpu(errors={"nvmlDeviceGetMemoryInfo_v2": "NOT_SUPPORTED"}))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == FakeGpu().memory_total


def test_lost_gpu_still_gives_a_handle_but_every_call_fails(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu(errors={"*": "GPU_IS_LOST"}), FakeGpu(name="healthy")]))
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    for call in (
        pynvml.nvmlDeviceGetName,
        pynvml.nvmlDeviceGetUUID,
        pynvml.nvmlDeviceGetMemoryInfo,
        pynvml.nvmlDeviceGetUtilizationRates,
        pynvml.nvmlDeviceGetPowerUsage,
        pynvml.nvmlDeviceGetComputeRunningProcesses,
        pynvml.nvmlGpmQueryDeviceSupport,
    ):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call(h0)
    assert pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(1)) == "healthy"


def test_specific_error_beats_star(fake: Fake) -> None:
    fake.start(one_gpu(errors={"*": "GPU_IS_LOST", "nvmlDeviceGetName": "UNKNOWN"}))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_Unknown):
        pynvml.nvmlDeviceGetName(h)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUUID(h)


def test_star_error_other_than_lost_fails_the_handle_lookup(fake: Fake) -> None:
    fake.start(one_gpu(errors={"*": "NO_PERMISSION"}))
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceGetHandleByIndex(0)


def test_system_level_error_injection(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu()], errors={"nvmlSystemGetDriverVersion": "NOT_SUPPORTED"}))
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlSystemGetDriverVersion()
    assert pynvml.nvmlSystemGetNVMLVersion() == "12.550.90.07"


@pytest.mark.parametrize(
    ("name", "exception"),
    [
        ("DRIVER_NOT_LOADED", pynvml.NVMLError_DriverNotLoaded),
        ("LIB_RM_VERSION_MISMATCH", pynvml.NVMLError_LibRmVersionMismatch),
        ("NO_PERMISSION", pynvml.NVMLError_NoPermission),
    ],
)
def test_init_error_fails_init_and_leaves_nvml_uninitialized(
    fake: Fake, name: str, exception: type[pynvml.NVMLError]
) -> None:
    fake.start(FakeState(gpus=[FakeGpu()], init_error=name), init=False)
    with pytest.raises(exception):
        pynvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_init_error_can_clear_for_a_retry(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu()], init_error="DRIVER_NOT_LOADED"), init=False)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()
    fake.write(FakeState(gpus=[FakeGpu()]))
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetCount() == 1


def test_every_function_needs_init(fake: Fake) -> None:
    lib = fake.start(one_gpu(), init=False)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlSystemGetDriverVersion()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetName(h)
    assert lib.nvmlShutdown() == pynvml.NVML_ERROR_UNINITIALIZED


def test_init_is_refcounted(fake: Fake) -> None:
    lib = fake.start(one_gpu())
    assert lib.nvmlInit_v2() == pynvml.NVML_SUCCESS
    assert lib.nvmlInit() == pynvml.NVML_SUCCESS
    for _ in range(2):
        assert lib.nvmlShutdown() == pynvml.NVML_SUCCESS
        assert pynvml.nvmlDeviceGetCount() == 1
    pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_error_strings_match_the_real_library(fake: Fake) -> None:
    fake.start()
    assert pynvml.nvmlErrorString(pynvml.NVML_ERROR_GPU_IS_LOST) == "GPU is lost"
    assert pynvml.nvmlErrorString(pynvml.NVML_ERROR_NOT_SUPPORTED) == "Not Supported"
    assert pynvml.nvmlErrorString(pynvml.NVML_ERROR_UNKNOWN) == "Unknown Error"
    assert pynvml.nvmlErrorString(12345) == "Unknown Error"


# --- state changes -----------------------------------------------------------------------------


def test_state_change_is_seen_without_reinit(fake: Fake) -> None:
    fake.start(one_gpu(temperature_c=40))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    for temperature in (41, 42, 99):  # same size twice in a row: the mtime alone cannot tell
        fake.write(one_gpu(temperature_c=temperature))
        assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == temperature


def test_gpu_lost_mid_run_then_back(fake: Fake) -> None:
    fake.start(one_gpu())
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 70_000
    fake.write(one_gpu(errors={"*": "GPU_IS_LOST"}))
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetPowerUsage(h)
    fake.write(one_gpu(power_mw=80_000))
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 80_000


def test_gpu_removed_from_state_makes_its_handle_lost(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu(), FakeGpu()]))
    h1 = pynvml.nvmlDeviceGetHandleByIndex(1)
    fake.write(one_gpu())
    assert pynvml.nvmlDeviceGetCount() == 1
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetName(h1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(1)


def test_state_file_appearing_after_init_is_read(fake: Fake) -> None:
    fake.start()
    assert pynvml.nvmlDeviceGetCount() == 0
    fake.write(FakeState(gpus=[FakeGpu(), FakeGpu(), FakeGpu()]))
    assert pynvml.nvmlDeviceGetCount() == 3


# --- profiles ----------------------------------------------------------------------------------

R535_ADDITIONS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
)
R550_ADDITIONS = ("nvmlDeviceGetProcessesUtilizationInfo",)
COMMON = (
    "nvmlInit",
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetProcessUtilization",
)
HOOKS = ("fakenvmlCallCount", "fakenvmlResetCallCounts")
ECC_MODE_AND_LINK = (
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
)
V2_PROCESSES = ("nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2")
R515_ADDITIONS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMemoryInfo_v2",
)
R580_ADDITIONS = ("nvmlDeviceGetTemperatureV",)
MIG_COMMON = (
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes",
    "nvmlDeviceGetAttributes_v2",
)
"""MIG came with R450: every profile from r470 has it."""
HEALTH_COMMON = (
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPages_v2",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetViolationStatus",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait",
    "nvmlEventSetFree",
)
"""Health calls older than every profile (the legacy event wait included)."""
R450_ADDITIONS = ("nvmlDeviceGetArchitecture", "nvmlDeviceGetRemappedRows", "nvmlEventSetWait_v2")
R535_MIG_ADDITIONS = ("nvmlGpmMigSampleGet",)
_R470 = set(COMMON + HOOKS + ECC_MODE_AND_LINK + HEALTH_COMMON + MIG_COMMON + R450_ADDITIONS)
_R550 = _R470 | set(R535_ADDITIONS + R535_MIG_ADDITIONS + R550_ADDITIONS)
EXPECTED_SYMBOLS = {
    "r430": set(COMMON + HOOKS + ECC_MODE_AND_LINK + HEALTH_COMMON) - set(V2_PROCESSES),
    "r470": _R470,
    "r515": _R470 | set(R515_ADDITIONS),
    "r535": _R470 | set(R535_ADDITIONS + R535_MIG_ADDITIONS),
    "r550": _R550,
    "r580": _R550 | set(R580_ADDITIONS),
    "next": (_R550 | set(R580_ADDITIONS)) - {"nvmlDeviceGetTemperature"},
}
REAL_R580 = pathlib.Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-80gb-hbm3-r580-idle.nvml.json"


def exported_symbols(library: pathlib.Path) -> set[str]:
    """Names of the functions ``library`` exports, read with nm from binutils (which gcc needs)."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[1:2] == ["T"]}


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_exports_exactly_its_symbols(profile: str) -> None:
    assert exported_symbols(build(profile) / LIBRARY_NAME) == EXPECTED_SYMBOLS[profile]


def test_r580_exports_what_the_real_r580_exported() -> None:
    """Symbols probed on a real H100 with driver 580.159.04: those the fake implements are in r580, and only the
    ones the real driver had are."""
    real = json.loads(REAL_R580.read_text())["symbols"]
    implemented = set().union(*EXPECTED_SYMBOLS.values())
    exported = exported_symbols(build("r580") / LIBRARY_NAME)
    for name, present in real.items():
        if name in implemented:
            assert (name in exported) == present, name
    assert {"nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"} <= exported


def test_pci_info_answers_as_the_real_r580_did(fake: Fake) -> None:
    real = json.loads(REAL_R580.read_text())["devices"][0]["nvmlDeviceGetPciInfo"]["value"]
    fake.start(FakeState(gpus=[FakeGpu(pci_bus_id=real["busId"])]), profile="r580")

    info = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(0))

    assert {key: getattr(info, key) for key in real} == real


def test_r470_lacks_v3_and_pynvml_raises_function_not_found(fake: Fake) -> None:
    fake.start(one_gpu(processes=[FakeProcess(pid=7, used_memory=1)]), profile="r470")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h)
    # pynvml's unversioned wrapper turns that into a different, non-NVMLError exception.
    with pytest.raises(pynvml.NVMLLibraryMismatchError):
        pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v2(h)] == [7]
    for call in (
        lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
        lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        lambda: pynvml.nvmlDeviceGetProcessesUtilizationInfo(h, 0),
        pynvml.nvmlGpmSampleAlloc,
    ):
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            call()
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0


def test_r535_has_v3_but_not_processes_utilization_info(fake: Fake) -> None:
    fake.start(one_gpu(processes=[FakeProcess(pid=7, used_memory=1)]), profile="r535")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)] == [7]
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetProcessesUtilizationInfo(h, 0)


def test_switching_profiles_in_process(fake: Fake) -> None:
    fake.start(one_gpu(), profile="r550")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h) == []
    pynvml.nvmlShutdown()
    fake.start(profile="r470")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h)
    pynvml.nvmlShutdown()
    fake.start(profile="r550")
    assert pynvml.nvmlDeviceGetComputeRunningProcesses_v3(pynvml.nvmlDeviceGetHandleByIndex(0)) == []


def test_library_loads_by_name_in_a_subprocess(fake: Fake) -> None:
    fake.write(one_gpu(name="Subprocess GPU"))
    env = {**os.environ, "LD_LIBRARY_PATH": str(build("r535"))}
    code = (
        "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); "
        "print(pynvml.nvmlDeviceGetName(h), pynvml.nvmlSystemGetDriverVersion())"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "Subprocess GPU 535.183.01"


# --- memory ------------------------------------------------------------------------------------


def test_memory_v1_counts_reserved_as_used(fake: Fake) -> None:
    fake.start(one_gpu(memory_total=1000, memory_reserved=100, memory_used=300))
    mem = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
    assert (mem.total, mem.used, mem.free) == (1000, 400, 600)


def test_memory_v2_reports_reserved_separately(fake: Fake) -> None:
    fake.start(one_gpu(memory_total=1000, memory_reserved=100, memory_used=300))
    mem = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0), version=pynvml.nvmlMemory_v2)
    assert (mem.total, mem.reserved, mem.used, mem.free) == (1000, 100, 300, 600)


def test_memory_v2_rejects_a_wrong_struct_version(fake: Fake) -> None:
    fake.start(one_gpu())
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0), version=0x01000028)


# --- process lists -----------------------------------------------------------------------------


def test_process_list_insufficient_size_protocol(fake: Fake) -> None:
    lib = fake.start(one_gpu(processes=[FakeProcess(pid=p, used_memory=p * 10) for p in (1, 2, 3)]))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    fn = lib.nvmlDeviceGetComputeRunningProcesses_v3
    count = ctypes.c_uint(0)
    assert fn(h, ctypes.byref(count), None) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert count.value == 3
    infos = (pynvml.c_nvmlProcessInfo_v3_t * 3)()
    count.value = 2
    assert fn(h, ctypes.byref(count), infos) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert count.value == 3
    assert fn(h, ctypes.byref(count), infos) == pynvml.NVML_SUCCESS
    assert [(i.pid, i.usedGpuMemory, i.gpuInstanceId) for i in infos] == [
        (1, 10, NO_INSTANCE),
        (2, 20, NO_INSTANCE),
        (3, 30, NO_INSTANCE),
    ]


def test_empty_process_list_is_success_with_zero_count(fake: Fake) -> None:
    lib = fake.start(one_gpu())
    count = ctypes.c_uint(5)
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    rc = lib.nvmlDeviceGetGraphicsRunningProcesses_v3(h, ctypes.byref(count), None)
    assert (rc, count.value) == (pynvml.NVML_SUCCESS, 0)


def test_legacy_process_list_uses_the_v1_struct(fake: Fake) -> None:
    processes = [FakeProcess(pid=11, used_memory=111), FakeProcess(pid=22, used_memory=222)]
    lib = fake.start(one_gpu(processes=processes))
    infos = (ProcessInfoV1 * 2)()
    count = ctypes.c_uint(2)
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    rc = lib.nvmlDeviceGetComputeRunningProcesses(h, ctypes.byref(count), infos)
    assert rc == pynvml.NVML_SUCCESS
    assert [(i.pid, i.usedGpuMemory) for i in infos] == [(11, 111), (22, 222)]


# --- process utilization -----------------------------------------------------------------------

SAMPLES = [
    FakeSample(pid=1, timestamp_us=1_000, sm=10, mem=1),
    FakeSample(pid=2, timestamp_us=2_000, sm=20, mem=2, enc=3, dec=4),
    FakeSample(pid=1, timestamp_us=3_000, sm=30, mem=3),
]


def test_process_utilization_returns_only_newer_samples(fake: Fake) -> None:
    fake.start(one_gpu(samples=SAMPLES))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    got = pynvml.nvmlDeviceGetProcessUtilization(h, 1_000)
    assert [(s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil) for s in got] == [
        (2, 2_000, 20, 2, 3, 4),
        (1, 3_000, 30, 3, 0, 0),
    ]
    assert len(pynvml.nvmlDeviceGetProcessUtilization(h, 0)) == 3


def test_process_utilization_not_found_without_newer_samples(fake: Fake) -> None:
    fake.start(one_gpu(samples=SAMPLES))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessUtilization(h, 3_000)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessesUtilizationInfo(h, 3_000)


def test_processes_utilization_info_matches_process_utilization(fake: Fake) -> None:
    fake.start(one_gpu(samples=SAMPLES))
    got = pynvml.nvmlDeviceGetProcessesUtilizationInfo(pynvml.nvmlDeviceGetHandleByIndex(0), 1_500)
    assert [(s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil, s.jpgUtil) for s in got] == [
        (2, 2_000, 20, 2, 3, 4, 0),
        (1, 3_000, 30, 3, 0, 0, 0),
    ]


def test_processes_utilization_info_checks_the_struct_version(fake: Fake) -> None:
    lib = fake.start(one_gpu(samples=SAMPLES))
    info = pynvml.c_nvmlProcessesUtilizationInfo_v1_t()
    info.version = 0x02000018
    rc = lib.nvmlDeviceGetProcessesUtilizationInfo(pynvml.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info))
    assert rc == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


# --- GPM ---------------------------------------------------------------------------------------


def gpm_metrics(sample1: object, sample2: object, metric_ids: list[int]) -> pynvml.c_nvmlGpmMetricsGet_t:
    """Run nvmlGpmMetricsGet for ``metric_ids`` between two samples."""
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(metric_ids)
    request.sample1 = sample1
    request.sample2 = sample2
    for i, metric_id in enumerate(metric_ids):
        request.metrics[i].metricId = metric_id
    return pynvml.nvmlGpmMetricsGet(request)


@pytest.mark.parametrize("profile", ["r535", "r550"])
def test_gpm_round_trip(fake: Fake, profile: str) -> None:
    fake.start(one_gpu(gpm_sm_util=10.0, gpm_sm_occupancy=20.0, gpm_dram_bw_util=30.0), profile=profile)
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 1
    s1, s2 = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    pynvml.nvmlGpmSampleGet(h, s1)
    fake.write(
        one_gpu(
            gpm_sm_util=55.5,
            gpm_sm_occupancy=44.25,
            gpm_dram_bw_util=12.75,
            gpm_fp32_util=7.5,
            gpm_pcie_rx_mib=300.0,
            gpm_nvlink_tx_mib=-1.0,
        )
    )
    pynvml.nvmlGpmSampleGet(h, s2)
    ids = [
        pynvml.NVML_GPM_METRIC_SM_UTIL,
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        pynvml.NVML_GPM_METRIC_FP32_UTIL,
        pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,  # negative in the state: a GPU without NVLink
        pynvml.NVML_GPM_METRIC_INTEGER_UTIL,  # not modelled
    ]
    metrics = gpm_metrics(s1, s2, ids).metrics
    # The value recorded in the second sample, as of the moment it was taken.
    assert [(m.nvmlReturn, m.value) for m in metrics[:5]] == [(0, 55.5), (0, 44.25), (0, 12.75), (0, 7.5), (0, 300.0)]
    assert metrics[5].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert metrics[6].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    pynvml.nvmlGpmSampleFree(s1)
    pynvml.nvmlGpmSampleFree(s2)


def test_gpm_unsupported_gpu(fake: Fake) -> None:
    fake.start(one_gpu(gpm_supported=False))
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 0
    sample = pynvml.nvmlGpmSampleAlloc()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlGpmSampleGet(h, sample)
    pynvml.nvmlGpmSampleFree(sample)


def test_gpm_rejects_samples_from_two_gpus(fake: Fake) -> None:
    fake.start(FakeState(gpus=[FakeGpu(), FakeGpu()]))
    s1, s2 = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    pynvml.nvmlGpmSampleGet(pynvml.nvmlDeviceGetHandleByIndex(0), s1)
    pynvml.nvmlGpmSampleGet(pynvml.nvmlDeviceGetHandleByIndex(1), s2)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        gpm_metrics(s1, s2, [pynvml.NVML_GPM_METRIC_SM_UTIL])
    pynvml.nvmlGpmSampleFree(s1)
    pynvml.nvmlGpmSampleFree(s2)


def test_gpm_checks_struct_versions(fake: Fake) -> None:
    lib = fake.start(one_gpu())
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    sample = pynvml.nvmlGpmSampleAlloc()
    pynvml.nvmlGpmSampleGet(h, sample)
    request = pynvml.c_nvmlGpmMetricsGet_t(version=2, numMetrics=0, sample1=sample, sample2=sample)
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlGpmMetricsGet(request)
    support = pynvml.c_nvmlGpmSupport_t(version=9)
    rc = lib.nvmlGpmQueryDeviceSupport(h, ctypes.byref(support))
    assert rc == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    pynvml.nvmlGpmSampleFree(sample)


# --- call counter ------------------------------------------------------------------------------


def test_call_counter_counts_every_call_and_resets(fake: Fake) -> None:
    lib = fake.start(one_gpu(errors={"nvmlDeviceGetFanSpeed": "NOT_SUPPORTED"}), profile="r470")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    for _ in range(3):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetFanSpeed(h)
    assert call_count(lib, "nvmlDeviceGetFanSpeed") == 3  # failed calls count too
    assert call_count(lib, "nvmlInitWithFlags") == 1
    assert call_count(lib, "nvmlGpmSampleGet") == 0  # not in this profile
    assert call_count(lib, "noSuchFunction") == 0
    lib.fakenvmlResetCallCounts()
    assert call_count(lib, "nvmlDeviceGetFanSpeed") == 0


# --- the state writer --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        one_gpu(name="two\nlines"),
        one_gpu(errors={"nvmlDeviceGetName": "NOT_AN_ERROR"}),
        one_gpu(errors={"nvml Device": "UNKNOWN"}),
        one_gpu(temperature_c=-1),
        one_gpu(processes=[FakeProcess(pid=1, used_memory=1, kind="mps")]),
        FakeState(init_error="NVML_ERROR_UNKNOWN"),
    ],
)
def test_write_state_rejects_what_the_format_cannot_carry(tmp_path: pathlib.Path, state: FakeState) -> None:
    with pytest.raises(ValueError):
        write_state(tmp_path / "state", state)
    assert not (tmp_path / "state").exists()


def test_rendered_state_is_line_per_field() -> None:
    text = render_state(FakeState(gpus=[FakeGpu(name="A B", processes=[FakeProcess(pid=5, used_memory=6)])]))
    lines = text.splitlines()
    assert lines[0] == "fakenvml 1"
    assert "name A B" in lines
    assert "process 5 6 compute" in lines
