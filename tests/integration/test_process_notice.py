"""The "no permission to list processes" notice holds on every tick, fast ones included, while the driver refuses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gputop.collect.sampler import SnapshotMaker
from tests.fakenvml.state import FakeState
from tests.machines import h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NOTICE = "GPU 0: no permission to list its processes (run as root to see them)"
REFUSED = {"nvmlDeviceGetComputeRunningProcesses": "NO_PERMISSION"}  # every _vN of the call


@pytest.fixture
def maker() -> Iterator[SnapshotMaker]:
    # Only the first snapshot and the forced ones are slow ticks: every other one reuses the process lists.
    m = SnapshotMaker(slow_interval_s=3600.0)
    yield m
    m.close()


def test_process_list_notice_is_on_every_fast_tick_until_a_slow_tick_clears_it(fake_driver, maker):
    driver = fake_driver(FakeState(gpus=[h100(0, errors=REFUSED), h100(1)]))
    maker.start()

    slow = maker.snapshot()
    asked = driver.calls("nvmlDeviceGetComputeRunningProcesses_v3")
    fast = [maker.snapshot() for _ in range(4)]

    assert asked >= 1
    assert driver.calls("nvmlDeviceGetComputeRunningProcesses_v3") == asked  # the fast ticks did not ask again
    assert [snap.notices for snap in (slow, *fast)] == [(NOTICE,)] * 5

    driver.write(FakeState(gpus=[h100(0), h100(1)]))
    cleared = maker.snapshot(force_slow=True)
    after = [maker.snapshot() for _ in range(3)]

    assert [snap.notices for snap in (cleared, *after)] == [()] * 4


def test_process_list_notice_comes_back_when_the_driver_refuses_again(fake_driver, maker):
    driver = fake_driver(FakeState(gpus=[h100(0)]))
    maker.start()
    assert maker.snapshot().notices == ()

    driver.write(FakeState(gpus=[h100(0, errors=REFUSED)]))
    refused = [maker.snapshot(force_slow=True), maker.snapshot(), maker.snapshot()]

    assert [snap.notices for snap in refused] == [(NOTICE,)] * 3
