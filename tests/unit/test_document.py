"""The JSON document (schema 1) and the --once text table, from plain snapshot values."""

from __future__ import annotations

import json

import pytest

from gputop.collect.nvml import cuda_version_text, decode_clock_reasons
from gputop.collect.sampler import namespace_notice
from gputop.document import snapshot_to_dict, snapshot_to_json
from gputop.model import (
    DRIVER_OK,
    DRIVER_UNAVAILABLE,
    GPU_LOST_STATE,
    MEASURING,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostProcess,
    Snapshot,
    TrainingView,
    Worker,
    frozen_reasons,
)
from gputop.table import render_text
from tests.factories import host_info
from tests.ui.job_scenes import AGENT_PID, JOB_ID, RANK_PIDS, torchrun_job, unprobed_job

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

HOST = host_info(per_core=(10.0, 15.0), load_average=(0.5, 0.4, 0.3), memory_gib=16, used_gib=4)
DRIVER = DriverInfo(DRIVER_OK, driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550.90.07")


def snapshot(gpus=(), processes=(), driver=DRIVER, notices=()) -> Snapshot:
    return Snapshot(time=1_700_000_000.0, host=HOST, driver=driver, gpus=gpus, processes=processes, notices=notices)


def test_unreadable_values_are_null_in_json_with_their_reason():
    gpu = Gpu(
        index=0, uuid="GPU-x", name="T4", fan_percent=None, unavailable=frozen_reasons({"fan_percent": "unsupported"})
    )

    doc = json.loads(snapshot_to_json(snapshot(gpus=(gpu,))))

    assert doc["gpus"][0]["fan_percent"] is None
    assert doc["gpus"][0]["unavailable"] == {"fan_percent": "unsupported"}


def test_zero_stays_zero_in_json():
    gpu = Gpu(index=0, uuid="GPU-x", name="T4", utilization_gpu_percent=0.0, fan_percent=0.0)

    doc = snapshot_to_dict(snapshot(gpus=(gpu,)))

    assert doc["gpus"][0]["utilization_gpu_percent"] == 0.0
    assert doc["gpus"][0]["fan_percent"] == 0.0


def test_json_top_level_keys_are_stable():
    doc = snapshot_to_dict(snapshot())

    assert list(doc) == ["schema", "time", "host", "driver", "gpus", "processes", "notices", "training", "jobs"]
    assert doc["schema"] == 1
    assert doc["time"] == 1_700_000_000.0


def test_a_worker_in_json_keeps_its_flat_keys_with_its_host_values_and_both_reasons():
    host = HostProcess(
        pid=201,
        ppid=200,
        user="alice",
        name="pt_data_worker",
        rss_bytes=10**9,
        start_time=1_699_999_000.0,
        status="sleeping",
        num_threads=3,
        unavailable=frozen_reasons({"command": "no permission", "cpu_percent": MEASURING}),
    )
    worker = Worker(host, worker_id=1, age_s=1000.0, unavailable=frozen_reasons({"uss_bytes": "access denied"}))
    snap = Snapshot(
        1_700_000_000.0, HOST, DRIVER, host_processes=(host,), training=(TrainingView(200, workers=(worker,)),)
    )

    (record,) = json.loads(snapshot_to_json(snap))["training"][0]["workers"]

    assert list(record) == [
        "pid",
        "parent_pid",
        "worker_id",
        "status",
        "cpu_percent",
        "rss_bytes",
        "uss_bytes",
        "age_s",
        "unavailable",
    ]
    assert record == {
        "pid": 201,
        "parent_pid": 200,
        "worker_id": 1,
        "status": "sleeping",
        "cpu_percent": None,
        "rss_bytes": 10**9,
        "uss_bytes": None,
        "age_s": 1000.0,
        "unavailable": {"cpu_percent": MEASURING, "uss_bytes": "access denied"},
    }


def test_unavailable_driver_is_reported_with_empty_gpus():
    doc = snapshot_to_dict(snapshot(driver=DriverInfo(DRIVER_UNAVAILABLE, reason="driver is not loaded")))

    assert doc["driver"]["status"] == "unavailable"
    assert doc["driver"]["reason"] == "driver is not loaded"
    assert doc["gpus"] == []


def test_text_shows_unreadable_values_as_na_not_zero():
    gpu = Gpu(
        index=0,
        uuid="GPU-x",
        name="Tesla T4",
        memory_total_bytes=16 * 1024**3,
        memory_used_bytes=0,
        utilization_gpu_percent=0.0,
        fan_percent=None,
        unavailable=frozen_reasons({"fan_percent": "unsupported"}),
    )

    out = render_text(snapshot(gpus=(gpu,)))

    row = next(line for line in out.splitlines() if "Tesla T4" in line)
    assert "N/A" in row
    assert " 0%" in row
    assert "0B / 16.0GiB" in row


def test_text_shows_a_lost_gpu_with_its_reason():
    lost = Gpu(index=1, uuid="GPU-y", name="A100", state=GPU_LOST_STATE, reason="GPU is lost (fell off the bus)")

    out = render_text(snapshot(gpus=(lost,)))

    assert "LOST" in out
    assert "fell off the bus" in out


def test_text_lists_processes_after_gpus_with_elapsed_time():
    gpu = Gpu(index=0, uuid="GPU-x", name="A100")
    proc = GpuProcess(
        pid=4242,
        gpu_index=0,
        kind="compute",
        gpu_memory_bytes=3 * 1024**3,
        host=HostProcess(pid=4242, user="ada", command="python train.py", start_time=1_700_000_000.0 - 3725),
    )

    out = render_text(snapshot(gpus=(gpu,), processes=(proc,)))

    assert out.index("A100") < out.index("4242")
    row = next(line for line in out.splitlines() if "4242" in line)
    assert "ada" in row and "3.00GiB" in row and "1:02:05" in row and row.endswith("python train.py")


def test_text_without_driver_gives_the_reason():
    out = render_text(snapshot(driver=DriverInfo(DRIVER_UNAVAILABLE, reason="NVIDIA driver is not loaded")))

    assert "No GPU information: NVIDIA driver is not loaded" in out


def test_notices_are_printed():
    out = render_text(snapshot(notices=("2 GPU processes not visible",)))

    assert "note: 2 GPU processes not visible" in out


def test_clock_reasons_decode_to_names():
    assert decode_clock_reasons(0) == ()
    assert decode_clock_reasons(0x1 | 0x4 | 0x40) == ("gpu_idle", "sw_power_cap", "hw_thermal_slowdown")


def test_cuda_version_reads_as_major_dot_minor():
    assert (cuda_version_text(12040), cuda_version_text(11080), cuda_version_text(13000)) == ("12.4", "11.8", "13.0")


def test_namespace_notice_counts_hidden_pids_once():
    hidden = [GpuProcess(pid=7, gpu_index=i, kind="compute", host=HostProcess(pid=7, visible=False)) for i in range(2)]

    assert namespace_notice([]) is None
    assert namespace_notice(hidden).startswith("1 GPU process not visible")


def test_every_clock_event_bit_decodes_to_a_throttle_reason_of_the_model():
    from gputop.collect.nvml import CLOCK_EVENT_REASONS
    from gputop.model import THROTTLE_REASONS

    assert tuple(name for _, name in CLOCK_EVENT_REASONS) == THROTTLE_REASONS
    assert decode_clock_reasons(sum(bit for bit, _ in CLOCK_EVENT_REASONS)) == THROTTLE_REASONS


def test_json_lists_each_training_job_with_its_ranks_in_order():
    (job,) = snapshot_to_dict(torchrun_job())["jobs"]

    assert (job["id"], job["kind"], job["world_size"], job["agent_pids"]) == (JOB_ID, "torchrun", 4, [AGENT_PID])
    assert job["ranks"] == [{"pid": pid, "rank": n, "local_rank": n} for n, pid in enumerate(RANK_PIDS)]


def test_once_shows_each_training_job_with_a_row_per_rank_after_the_processes():
    text = render_text(torchrun_job())
    lines = text.splitlines()

    title = lines.index(f"Job {JOB_ID} of alice · torchrun · 4 ranks")
    assert title > max(i for i, line in enumerate(lines) if "python train.py" in line)
    assert lines[title + 1].split()[:6] == ["RANK", "PID", "GPU", "STEPS/S", "DATA", "WAIT"]
    assert [line.split()[:3] for line in lines[title + 2 : title + 6]] == [
        [str(n), str(pid), str(n)] for n, pid in enumerate(RANK_PIDS)
    ]


def test_once_says_how_to_get_the_numbers_of_a_job_without_the_probe():
    text = render_text(unprobed_job(), 80)

    assert "No probe report from this job, so STEPS/S, DATA WAIT and SYNC WAIT read N/A:" in text
    assert "gputop.probe.install()" in text
    lines = text.splitlines()
    title = lines.index(f"Job {JOB_ID} of alice · torchrun · 4 ranks")
    assert all(len(line) <= 80 for line in lines[title:])


def test_once_without_a_training_job_has_no_job_section():
    assert "Job " not in render_text(snapshot())
