"""The training collector's workers, from a host-process tree given to it: each worker refers to the host process
the collector was given for it, and keeps only its own values and reasons beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.collect.training import TrainingCollector
from gputop.model import MEASURING, HostProcess, frozen_reasons

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

JOB = 3_999_001
"""High PIDs that no process here has: what the collector reads of them in /proc is missing, with its reasons."""
NOW = 1_700_000_100.0


def test_each_worker_refers_to_its_host_process_and_holds_only_its_own_values(tmp_path: Path) -> None:
    job = HostProcess(JOB, 1, name="python", command="python train.py", start_time=NOW - 600)
    first = HostProcess(JOB + 1, JOB, name="pt_data_worker", cpu_percent=90.0, start_time=NOW - 60, status="running")
    new = HostProcess(
        JOB + 2,
        JOB,
        name="pt_data_worker",
        unavailable=frozen_reasons({"cpu_percent": MEASURING, "start_time": MEASURING}),
    )
    hosts = {h.pid: h for h in (job, first, new)}

    (view,) = TrainingCollector(probe_dir=str(tmp_path / "probe")).read([JOB], hosts, now=NOW)

    assert [w.pid for w in view.workers] == [JOB + 1, JOB + 2]
    assert all(w.host is hosts[w.pid] for w in view.workers)
    assert view.workers_cpu_percent == 90.0
    running, measured = view.workers
    assert running.age_s == 60.0 and "age_s" not in running.unavailable
    assert measured.age_s is None and measured.unavailable["age_s"] == MEASURING
    assert "cpu_percent" not in measured.unavailable  # the host's reasons stay in host.unavailable
    assert set(measured.unavailable) <= {"uss_bytes", "age_s"}
