"""The recorded demo run behind the ``demo`` screenshot: real snapshots of the job, from which the advisor, with the
demo's window, raises the finding the screenshot shows."""

from __future__ import annotations

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.demo import WINDOW_S
from gputop.model import PROBE_OK, job_views
from tests.demo import recorded

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_the_recording_is_of_the_demo_job_with_its_workers_and_the_probe() -> None:
    snapshots = recorded.snapshots()
    pid = recorded.job_pid(snapshots)
    [view] = job_views(snapshots[-1].training, pid)

    assert "-m gputop.demo.job" in snapshots[-1].host_process(pid).command
    assert len(view.workers) == 2
    assert view.workers_cpu_percent > 50
    assert view.probe.status == PROBE_OK
    assert view.loader.effective.num_workers == 2
    assert view.loader.data_wait_share > 0.5
    assert snapshots[-1].time - snapshots[0].time >= 40


def test_replayed_with_the_demos_window_the_advisor_finds_the_loop_input_bound() -> None:
    snapshots = recorded.snapshots()
    pid = recorded.job_pid(snapshots)
    advisor = Advisor(pid, AdvisorConfig(window_s=WINDOW_S))

    for snap in snapshots:
        active = advisor.update(snap)

    assert [a.id for a in active] == ["data-starved"]
    assert active[0].evidence["data_wait_share"] > 0.5
    assert active[0].evidence["num_workers"] == 2
    assert active[0].since - snapshots[0].time < 25  # a newcomer sees it within seconds
