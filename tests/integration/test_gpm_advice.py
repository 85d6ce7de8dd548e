"""From the fake driver's GPM values to the advisor's launch-bound and tensor-cores-idle findings."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

from gputop.advisor.rules import launch_bound, tensor_cores_idle
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.collect.nvml import NvmlCollector
from gputop.model import Gpu
from tests.advisor.build import loader, sample, view, workers
from tests.fakenvml.state import FakeState
from tests.machines import h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CONFIG = AdvisorConfig(window_s=2.0)


@pytest.fixture
def collector() -> Iterator[NvmlCollector]:
    nvml = NvmlCollector(retry_lost_after_s=0.0)
    yield nvml
    nvml.close()


def readings(collector: NvmlCollector, count: int = 6) -> list[Gpu]:
    """The GPU's readings after the first (which only measures), as the sampler takes them."""
    collector.read(slow=True)
    out = []
    for _ in range(count):
        time.sleep(0.005)
        gpus, _ = collector.read(slow=False)
        out.append(gpus[0])
    return out


def window_of(gpus: list[Gpu], **probe: object) -> JobWindow:
    training = view(loader(wait=0.01), workers(2), main_busy=0.98, main_status="running")
    if probe:
        training = dataclasses.replace(training, probe=dataclasses.replace(training.probe, **probe))
    return JobWindow(tuple(sample(i * 0.5, training, gpus=(g,)) for i, g in enumerate(gpus)))


def test_a_busy_gpu_with_idle_sms_from_the_driver_is_launch_bound(fake_driver, collector):
    fake_driver(FakeState(gpus=[h100(0, util_gpu=97, gpm_sm_util=14.0, gpm_sm_occupancy=8.0)]))

    finding = launch_bound(window_of(readings(collector)), CONFIG)

    assert finding is not None
    assert finding.evidence["sm_activity_percent"] == 14.0
    assert finding.evidence["sm_occupancy_percent"] == 8.0


def test_fp32_matmuls_on_the_fp32_pipes_from_the_driver_leave_the_tensor_cores_idle(fake_driver, collector):
    gpu = h100(0, util_gpu=97, gpm_sm_util=74.0, gpm_any_tensor_util=0.5, gpm_fp32_util=55.0)
    fake_driver(FakeState(gpus=[gpu]))
    gpus = readings(collector)
    fp32 = {"autocast": False, "float32_matmul_precision": "highest", "parameter_dtypes": ("float32",)}

    finding = tensor_cores_idle(window_of(gpus, **fp32), CONFIG)

    assert finding is not None
    assert (finding.evidence["tensor_activity_percent"], finding.evidence["fp32_activity_percent"]) == (0.5, 55.0)
    assert launch_bound(window_of(gpus), CONFIG) is None
    assert tensor_cores_idle(window_of(gpus, **{**fp32, "parameter_dtypes": ("bfloat16",)}), CONFIG) is None
