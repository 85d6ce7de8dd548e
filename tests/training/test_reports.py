"""The monitor reads a probe report only if it can trust it, and says why when it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from gputop.collect.sampler import SnapshotMaker
from gputop.collect.training import SHOWN_DIR_CHARS, TrainingCollector
from gputop.model import (
    PROBE_AWAITED,
    PROBE_FOREIGN,
    PROBE_LAUNCHER,
    PROBE_MALFORMED,
    PROBE_NONE,
    PROBE_OK,
    PROBE_STALE,
    ProbeReport,
)
from gputop.run.launch import probe_env
from tests.fakenvml.state import FakeGpu, FakeProcess, FakeState
from tests.training.conftest import report_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LOADER = {
    "id": 1,
    "requested": {"batch_size": 8, "num_workers": 2, "pin_memory": True},
    "effective": {"batch_size": 8, "num_workers": 2, "pin_memory": False},
    "worker_pids": [],
    "passes": 2,
    "batches": 40,
    "window_s": 10.0,
    "window_batches": 30,
    "data_wait_share": 0.4,
    "steps_per_s": 3.0,
    "samples_per_s": 24.0,
    "waiting_now_s": 1.0,
    "last_batch_age_s": 1.0,
}


@pytest.fixture
def job(spawn):
    return spawn()


def probe_of(job, probe_dir, monitor) -> ProbeReport:
    return monitor(job.pid).one_shot().training_view(job.pid).probe


def write(probe_dir, pid: int, content: str | dict) -> None:
    text = content if isinstance(content, str) else json.dumps(content)
    (probe_dir / f"{pid}.json").write_text(text)


def test_a_fresh_well_formed_report_is_used(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER], failures=3, last_failure="cuda stats: boom"))

    probe = probe_of(job, probe_dir, monitor)

    assert (probe.status, probe.failures, probe.last_failure) == (PROBE_OK, 3, "cuda stats: boom")
    (loader,) = probe.loaders
    assert (loader.data_wait_share, loader.steps_per_s, loader.samples_per_s) == (0.4, 3.0, 24.0)
    assert loader.overridden == ("pin_memory",)


def test_times_that_count_up_are_carried_to_the_moment_of_reading(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER], written_at=time.time() - 2))

    (loader,) = probe_of(job, probe_dir, monitor).loaders

    assert loader.waiting_now_s == pytest.approx(3.0, abs=0.5)
    assert loader.last_batch_age_s == pytest.approx(3.0, abs=0.5)


def test_no_report_is_none_without_a_reason(job, probe_dir, monitor):
    assert probe_of(job, probe_dir, monitor) == ProbeReport(PROBE_NONE)


def started_by_gputop_run(sleepers, directory) -> subprocess.Popen:
    """A Python process started as ``gputop run`` starts its command (the probe on), that makes no DataLoader."""
    env = probe_env(dict(os.environ), str(directory), "test")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    sleepers.append(proc)
    return proc


def test_a_process_gputop_run_started_awaits_the_probes_first_report(sleepers, probe_dir, monitor):
    job = started_by_gputop_run(sleepers, probe_dir)

    assert probe_of(job, probe_dir, monitor) == ProbeReport(PROBE_NONE, reason=PROBE_AWAITED)


def test_a_process_gputop_run_started_with_another_report_directory_says_where_its_reports_go(
    sleepers, probe_dir, monitor, tmp_path
):
    job = started_by_gputop_run(sleepers, tmp_path / "elsewhere")

    probe = probe_of(job, probe_dir, monitor)

    assert probe.status == PROBE_NONE
    elsewhere = str(tmp_path / "elsewhere")  # its end where the test's directory is long (a pytest-xdist worker's)
    shown = elsewhere if len(elsewhere) <= SHOWN_DIR_CHARS else "…" + elsewhere[-SHOWN_DIR_CHARS:]
    assert f"reporting to {shown}, not here" in (probe.reason or "")
    assert f"GPUTOP_PROBE_DIR={shown} gputop" in (probe.reason or "")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"format": "gputop-probe", "version": 1, "pid": ', "malformed report: Expecting value"),
        ("[1, 2, 3]", "not a gputop probe report"),
        ({"format": "gputop-probe", "version": 2}, "report version 2, this gputop reads 1"),
        ({"loaders": "many"}, "loaders is not a list"),
        ({"loaders": [{"id": "one"}]}, "loader without id"),
        ({"cuda": {"devices": [{"uuid": "x"}]}}, "cuda device without index"),
        ({"written_at": "yesterday"}, "no written_at"),
    ],
)
def test_a_malformed_report_is_marked_and_ignored(job, probe_dir, monitor, content, reason):
    if isinstance(content, dict):
        content = {**report_for(job.pid), **content}
    write(probe_dir, job.pid, content)

    probe = probe_of(job, probe_dir, monitor)

    assert probe.status == PROBE_MALFORMED
    assert reason in probe.reason
    assert probe.loaders == ()


def test_a_report_naming_another_pid_is_malformed(job, probe_dir, monitor):
    write(probe_dir, job.pid, {**report_for(job.pid), "pid": 1})

    assert probe_of(job, probe_dir, monitor).reason == "malformed report: report names PID 1"


def test_a_stale_report_is_marked_and_its_data_ignored(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER], written_at=time.time() - 30))

    probe = probe_of(job, probe_dir, monitor)

    assert (probe.status, probe.reason, probe.loaders) == (PROBE_STALE, "last written 30 s ago", ())


def test_a_report_left_by_an_earlier_process_with_the_same_pid_is_not_this_ones(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER], start_ticks=report_for(job.pid)["start_ticks"] - 1))

    probe = probe_of(job, probe_dir, monitor)

    assert (probe.status, probe.reason) == (PROBE_NONE, f"report left by an earlier process with PID {job.pid}")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_report_owned_by_another_user_is_not_read(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER]))
    os.chown(probe_dir / f"{job.pid}.json", 65534, 65534)

    probe = probe_of(job, probe_dir, monitor)

    assert (probe.status, probe.loaders) == (PROBE_FOREIGN, ())
    assert probe.reason == "report owned by uid 65534, not by this user"


def test_a_symlinked_report_is_not_followed(job, probe_dir, monitor, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(report_for(job.pid, loaders=[LOADER])))
    (probe_dir / f"{job.pid}.json").symlink_to(elsewhere)

    probe = probe_of(job, probe_dir, monitor)

    assert probe.status == PROBE_MALFORMED
    assert probe.reason.startswith("cannot open report")


def test_reports_in_a_directory_open_to_others_are_all_ignored(job, probe_dir, monitor):
    write(probe_dir, job.pid, report_for(job.pid, loaders=[LOADER]))
    probe_dir.chmod(0o777)

    probe = probe_of(job, probe_dir, monitor)

    assert probe.status == PROBE_NONE
    assert probe.reason == f"report directory {probe_dir} is open to other users (mode 777)"


def test_a_missing_directory_just_means_no_reports(job, tmp_path):
    collector = TrainingCollector(probe_dir=str(tmp_path / "never-made"))
    maker = SnapshotMaker(focus_pid=job.pid, training=collector)
    try:
        probe = maker.one_shot().training_view(job.pid).probe
    finally:
        maker.close()

    assert probe == ProbeReport(PROBE_NONE)


def test_the_final_view_keeps_which_gpu_each_cuda_device_was_once_nvml_no_longer_lists_the_job(
    job, probe_dir, monitor, fake_driver
):
    """Seen on an H100: torch names a device by its bare UUID, NVML by ``GPU-``; the live view joins them, and the
    report `gputop run` writes after the job has exited must keep that join, not fall back to an unknown GPU."""
    uuid = "4aa3f089-f296-0cce-368c-7afa6946ac09"
    held = 6 << 30
    fake_driver(FakeState(gpus=[FakeGpu(uuid="GPU-" + uuid, processes=[FakeProcess(job.pid, held)])]))
    device = {"device": 0, "uuid": uuid, "allocated_bytes": 1 << 30, "reserved_bytes": 2 << 30}
    write(probe_dir, job.pid, report_for(job.pid, cuda={"devices": [device]}))
    maker = monitor(job.pid)
    live = maker.one_shot().training_view(job.pid)
    assert [(d.gpu_index, d.nvml_process_bytes) for d in live.probe.cuda] == [(0, held)]
    last = report_for(job.pid, cuda={"devices": [{**device, "allocated_bytes": 3 << 30}]})
    write(probe_dir, job.pid, last)

    (final,) = maker.training.final_views((live,), run_id=last["run_id"])

    assert [(d.gpu_index, d.nvml_process_bytes, d.allocated_bytes) for d in final.probe.cuda] == [(0, held, 3 << 30)]


def test_torchruns_agent_started_by_gputop_run_is_not_said_to_await_a_report(sleepers, probe_dir, monitor):
    # The agent names its main thread pt_elastic; it starts the ranks and never iterates a DataLoader, so its view
    # said "awaiting the probe's first report" to the end of the job.
    env = probe_env(dict(os.environ), str(probe_dir), "test")
    agent = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'pt_elastic', 0, 0, 0); print('named', flush=True); "
    proc = subprocess.Popen([sys.executable, "-c", agent + "time.sleep(300)"], env=env, stdout=subprocess.PIPE)
    sleepers.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"named\n"

    view = monitor(proc.pid).one_shot().training_view(proc.pid)

    assert view.role == "torchrun agent"
    assert view.probe == ProbeReport(PROBE_NONE, reason=PROBE_LAUNCHER)
