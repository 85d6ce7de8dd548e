"""The capture converter (tests/fakenvml/capture.py): real nvidia-smi captures into the fake driver's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakenvml.capture import CALLS, MIB, fake_state, profile_for, read_capture
from tests.fakenvml.state import NVML_VALUE_NOT_AVAILABLE, render_state

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
XML = sorted(CAPTURES.glob("*.xml"))


@pytest.mark.parametrize("path", XML, ids=[p.stem for p in XML])
def test_every_na_is_an_nvml_error_never_a_zero(path: Path) -> None:
    capture = read_capture(path)
    state = fake_state(capture)

    render_state(state)  # every value fits the state file
    assert capture.gpus, "a capture with no GPU tests nothing"
    for captured, fake in zip(capture.gpus, state.gpus, strict=True):
        for key, calls in CALLS.items():
            for call in calls:
                assert (fake.errors.get(call) == "NOT_SUPPORTED") == (captured.values[key] is None), (key, call)
    for p in capture.processes:
        fake = [f for f in state.gpus[p.gpu_index].processes if f.pid == p.pid]
        assert {f.kind for f in fake} == ({"compute", "graphics"} if p.kind == "compute+graphics" else {p.kind})
        want = NVML_VALUE_NOT_AVAILABLE if p.used_bytes is None else p.used_bytes
        assert {f.used_memory for f in fake} == {want}


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_h100_capture_agrees_with_what_its_nvml_returned(state: str) -> None:
    """The XML and the raw pynvml dump taken on the same H100: memory within nvidia-smi's MiB rounding (NVML v2
    ``used`` excludes reserved; v1 ``used`` includes it), the fixed facts exactly."""
    capture = read_capture(CAPTURES / f"h100-80gb-hbm3-r580-{state}.xml")
    dump = json.loads((CAPTURES / f"h100-80gb-hbm3-r580-{state}.nvml.json").read_text())["devices"][0]
    fake = fake_state(capture).gpus[0]
    v1 = dump["nvmlDeviceGetMemoryInfo"]["value"]

    assert abs(fake.memory_total - v1["total"]) < MIB
    assert fake.memory_reserved == 480 * MIB == 503_316_480
    assert abs(fake.memory_used + fake.memory_reserved - v1["used"]) < MIB
    if state == "busy":
        assert (v1["total"], v1["used"] - fake.memory_reserved) == (85_520_809_984, 4_857_856_000)
        (process,) = dump["nvmlDeviceGetComputeRunningProcesses"]["value"]
        assert fake.processes[0].used_memory == process["usedGpuMemory"]
    assert fake.name == dump["nvmlDeviceGetName"]["value"]
    assert fake.uuid == dump["nvmlDeviceGetUUID"]["value"]
    assert fake.power_limit_mw == dump["nvmlDeviceGetEnforcedPowerLimit"]["value"]
    assert fake.pstate == dump["nvmlDeviceGetPerformanceState"]["value"]
    assert fake.clock_sm_max_mhz == dump["nvmlDeviceGetMaxClockInfo(1,)"]["value"]
    assert fake.clock_mem_max_mhz == dump["nvmlDeviceGetMaxClockInfo(2,)"]["value"]
    assert fake.pcie_link_gen == dump["nvmlDeviceGetCurrPcieLinkGeneration"]["value"]
    assert fake.pcie_link_width == dump["nvmlDeviceGetCurrPcieLinkWidth"]["value"]
    assert fake.pcie_link_gen_max == dump["nvmlDeviceGetMaxPcieLinkGeneration"]["value"]
    assert fake.pcie_link_width_max == dump["nvmlDeviceGetMaxPcieLinkWidth"]["value"]
    assert [fake.ecc_mode, fake.ecc_mode] == [bool(x) for x in dump["nvmlDeviceGetEccMode"]["value"]]
    assert dump["nvmlDeviceGetFanSpeed"]["error"] == "Not Supported"
    assert fake.errors["nvmlDeviceGetFanSpeed"] == "NOT_SUPPORTED"


@pytest.mark.parametrize(
    ("version", "profile"),
    [
        ("430.26", "r430"),
        ("460.27.04", "r470"),
        ("470.74", "r470"),
        ("512.78", "r515"),
        ("515.105.01", "r515"),
        ("535.54.03", "r535"),
        ("536.40", "r535"),
        ("570.124.04", "r550"),
        ("580.159.04", "r580"),
        ("595.84", "r580"),
    ],
)
def test_the_driver_branch_picks_the_profile(version: str, profile: str) -> None:
    assert profile_for(version) == profile


def test_windows_processes_have_unreported_memory_in_both_lists() -> None:
    capture = read_capture(CAPTURES / "tesla-t4-windows-r512.xml")
    state = fake_state(capture, {p.pid: 1000 + n for n, p in enumerate(capture.processes)})

    assert len(capture.processes) == 15
    assert {p.kind for p in capture.processes} == {"compute+graphics"}
    assert len(state.gpus[0].processes) == 30
    assert {p.used_memory for p in state.gpus[0].processes} == {NVML_VALUE_NOT_AVAILABLE}
    assert min(p.pid for p in state.gpus[0].processes) == 1000


def test_k80_has_no_cuda_version_fan_or_pcie_counters() -> None:
    capture = read_capture(CAPTURES / "tesla-k80-x4-r430.xml")
    state = fake_state(capture)

    assert capture.cuda_version is None
    assert state.errors["nvmlSystemGetCudaDriverVersion_v2"] == "NOT_FOUND"
    assert all(g.errors["nvmlDeviceGetFanSpeed"] == "NOT_SUPPORTED" for g in state.gpus)
    assert all(g.errors["nvmlDeviceGetPcieThroughput"] == "NOT_SUPPORTED" for g in state.gpus)
    assert [g.values["memory_reserved_bytes"] for g in capture.gpus] == [None] * 4
    assert capture.gpus[0].values["throttle_reasons"] == ["applications_clocks_setting"]
