"""The real `gputop` command in a subprocess, loading the fake driver through LD_LIBRARY_PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from gputop import __version__
from gputop.collect.nvml.health import NOT_WATCHED
from tests.conftest import FakeDriver
from tests.factories import DEADLINE_S, wait_until
from tests.fakenvml.state import FakeState
from tests.machines import GIB, h100, training_box
from tests.ui.conftest import TRAINING_JOB

GPU_KEYS = {
    "index",
    "uuid",
    "name",
    "state",
    "reason",
    "memory_total_bytes",
    "memory_used_bytes",
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "fan_percent",
    "pstate",
    "clock_sm_mhz",
    "clock_mem_mhz",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "throttle_reasons",
}
PROCESS_KEYS = {
    "pid",
    "gpu_index",
    "kind",
    "gpu_memory_bytes",
    "sm_percent",
    "user",
    "command",
    "cpu_percent",
    "rss_bytes",
    "visible",
}


def gputop(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture
def driver(tmp_path) -> FakeDriver:
    """A fake driver for subprocesses only (not loaded in this process)."""
    return FakeDriver(tmp_path / "state.txt", "r550")


def no_driver_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_NVML_STATE", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = str(tmp_path)
    return env


def test_once_json_values_equal_the_state_file(driver, spawn):
    proc = spawn()
    driver.write(training_box(2, [proc.pid]))

    result = gputop("--once", "--json", env=driver.env())

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == 1
    assert doc["driver"] == {
        "status": "ok",
        "reason": None,
        "driver_version": "550.90.07",
        "cuda_version": "12.4",
        "nvml_version": "12.550.90.07",
    }
    g = doc["gpus"][1]
    assert g.keys() >= GPU_KEYS
    assert g["index"] == 1
    assert g["uuid"] == "GPU-6a1b2c3d-0000-4000-8000-000000000001"
    assert g["memory_total_bytes"] == 80 * GIB
    assert g["memory_used_bytes"] == 25 * GIB
    assert (g["utilization_gpu_percent"], g["utilization_memory_percent"]) == (87, 41)
    assert (g["temperature_c"], g["power_w"], g["power_limit_w"]) == (62, 512.345, 700)
    assert (g["fan_percent"], g["unavailable"]["fan_percent"]) == (None, "unsupported")
    assert (g["pstate"], g["clock_sm_mhz"], g["clock_mem_mhz"]) == (0, 1755, 2619)
    assert (g["pcie_rx_bytes_per_s"], g["pcie_tx_bytes_per_s"]) == (48_000 * 1024, 1_200 * 1024)
    assert g["throttle_reasons"] == ["sw_power_cap"]
    assert g["sm_activity_percent"] == 63.5
    # One snapshot starts no Xid watcher: ending its thread would wait out the driver's event wait (up to 0.25 s)
    assert g["health"]["state"] == "ok"
    assert g["health"]["unavailable"]["xids"] == NOT_WATCHED
    [p] = doc["processes"]
    assert p.keys() >= PROCESS_KEYS
    assert (p["pid"], p["gpu_index"], p["kind"], p["gpu_memory_bytes"]) == (proc.pid, 0, "compute", 6 * GIB)
    assert p["visible"] is True
    assert "time.sleep(300)" in p["command"]
    assert isinstance(p["cpu_percent"], float)


TEARDOWN = "teardown ran"
WITH_ATEXIT = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write({marker!r})); sys.argv = ['gputop', *{args!r}]; "
    "from gputop.cli import entry; entry()"
)


def entry_with_atexit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The installed command's entry point in a process that says whether the interpreter's teardown ran."""
    code = WITH_ATEXIT.format(marker=TEARDOWN, args=list(args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)


def test_one_snapshot_is_printed_whole_and_the_process_ends_without_teardown(driver, spawn):
    driver.write(training_box(8, [spawn().pid]))

    once = entry_with_atexit("--json", env=driver.env())
    other = entry_with_atexit("report", "/nonexistent/run.gputop", env=driver.env())

    assert once.returncode == 0, once.stderr
    assert len(once.stdout) > 8192  # more than one buffer's worth: the flush before the end wrote the rest
    assert len(json.loads(once.stdout)["gpus"]) == 8
    assert TEARDOWN not in once.stderr
    assert other.returncode != 0
    assert TEARDOWN in other.stderr  # every other command ends as Python does


def test_one_snapshot_to_a_reader_that_has_gone_exits_0_quietly(driver):
    driver.write(training_box(2, []))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=driver.env()
    )
    proc.stdout.close()  # before the snapshot is written: its write and the last flush both find no reader

    assert proc.wait(timeout=DEADLINE_S) == 0
    assert proc.stderr.read() == b""


def test_once_prints_a_table_of_gpus_then_processes(driver, spawn):
    proc = spawn()
    driver.write(training_box(2, [proc.pid]))

    result = gputop("--once", env=driver.env())

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "driver 550.90.07  CUDA 12.4" in out
    assert out.count("NVIDIA H100 80GB HBM3") == 2
    assert "20.0GiB / 80.0GiB" in out
    assert "513W / 700W" in out or "512W / 700W" in out
    assert "sw_power_cap" in out
    assert out.index("H100") < out.index(str(proc.pid))
    assert "6.00GiB" in out


def test_once_and_json_list_a_training_job_and_say_how_to_get_its_numbers(driver, spawn):
    job = spawn(TRAINING_JOB)  # a parent with two DataLoader-like workers: training evidence, no probe
    wait_until(lambda: len([c for c in psutil.Process(job.pid).children() if c.name() == "pt_data_worker"]) == 2)
    driver.write(training_box(1, [job.pid]))

    text = gputop("--once", env=driver.env())
    doc = json.loads(gputop("--json", env=driver.env()).stdout)

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Job ") and "single · 1 rank" in line)
    assert lines[title + 2].split()[:3] == ["?", str(job.pid), "0"]
    assert "No probe report from this job" in text.stdout
    [listed] = doc["jobs"]
    assert (listed["kind"], listed["ranks"]) == ("single", [{"pid": job.pid, "rank": None, "local_rank": None}])


def test_lost_gpu_shows_in_json_with_its_reason(driver):
    driver.write(FakeState(gpus=[h100(0), h100(1, errors={"*": "GPU_IS_LOST"})]))

    doc = json.loads(gputop("--json", env=driver.env()).stdout)

    assert [g["state"] for g in doc["gpus"]] == ["ok", "lost"]
    assert "lost" in doc["gpus"][1]["reason"]
    assert doc["gpus"][1]["memory_used_bytes"] is None


def test_no_driver_library_exits_0_with_the_reason(tmp_path):
    result = gputop("--once", "--json", env=no_driver_env(tmp_path))

    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert doc["driver"]["status"] == "unavailable"
    assert "libnvidia-ml.so.1 not found" in doc["driver"]["reason"]
    assert doc["gpus"] == []
    assert doc["host"]["cpu_count"] >= 1


def test_no_driver_text_output_says_why(tmp_path):
    result = gputop("--once", env=no_driver_env(tmp_path))

    assert result.returncode == 0
    assert "No GPU information: NVIDIA driver library libnvidia-ml.so.1 not found" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("init_error", "words"),
    [("DRIVER_NOT_LOADED", "driver is not loaded"), ("LIB_RM_VERSION_MISMATCH", "version mismatch")],
)
def test_driver_faults_give_a_clear_line_and_exit_0(driver, init_error, words):
    driver.write(FakeState(gpus=[h100(0)], init_error=init_error))

    result = gputop("--once", env=driver.env())

    assert result.returncode == 0
    assert words in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-d", "0"], "must be at least 0.1 seconds"),
        (["-d", "abc"], "not a number of seconds"),
        (["--interval", "nan"], "not a number of seconds: 'nan'"),
        (["--interval", "1e10"], "must be at most 86400 seconds (a day)"),
        (["--pid", "١"], "not a process id"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--pid", "abc"], "not a process id"),
        (["--pid", "-3"], "not a process id"),
        (["--pid", "4000000"], "no process with PID 4000000"),
        (["extra"], "invalid choice: 'extra'"),
        (["stream", "-n", "0"], "not a count of 1 or more: '0'"),
        (["stream", "--interval", "0.01"], "must be at least 0.1 seconds"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args, message):
    result = gputop(*args)

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("gputop: error: ")
    assert message in result.stderr


def test_version_and_help():
    assert gputop("--version").stdout.strip() == f"gputop {__version__}"
    help_text = gputop("--help").stdout
    for flag in ("--once", "--json", "--interval", "--pid", "--readonly"):
        assert flag in help_text


def test_installed_command_matches_module():
    exe = shutil.which("gputop", path=os.path.dirname(sys.executable))
    assert exe is not None
    result = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == f"gputop {__version__}"


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is not installed")
def test_pids_from_another_namespace_are_flagged_inside_a_new_pid_namespace(driver, spawn):
    proc = spawn()
    driver.write(training_box(1, [proc.pid]))
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a PID namespace here: {probe.stderr.decode().strip()}")

    result = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "gputop", "--json"],
        capture_output=True,
        text=True,
        env=driver.env(),
        timeout=30,
    )

    doc = json.loads(result.stdout)
    [p] = doc["processes"]
    assert p["pid"] == proc.pid
    assert p["visible"] is False
    assert p["command"] is None
    assert any("--pid=host" in n for n in doc["notices"])


def run_without(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run gputop in a Python where importing ``module`` fails, as on a machine without that package."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; "
        f"from gputop.cli import main; raise SystemExit(main({list(args)!r}))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)


def test_once_and_json_work_without_textual(driver):
    driver.write(training_box(1, []))

    result = run_without("textual", "--json", env=driver.env())

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["gpus"][0]["index"] == 0


def test_dashboard_without_textual_says_how_to_get_it():
    result = run_without("textual")

    assert result.returncode == 1
    assert result.stderr.strip() == (
        "gputop: error: the dashboard needs Textual (pip install textual); gputop --once and --json work without it"
    )


def test_without_nvidia_ml_py_the_driver_is_unavailable_with_the_reason(driver):
    driver.write(training_box(1, []))

    result = run_without("pynvml", "--json", env=driver.env())

    doc = json.loads(result.stdout)
    assert doc["driver"]["status"] == "unavailable"
    assert "nvidia-ml-py" in doc["driver"]["reason"]


def test_stream_prints_one_json_snapshot_per_line(driver):
    driver.write(training_box(2, []))

    result = gputop("stream", "--interval", "0.1", "--count", "3", env=driver.env())

    assert result.returncode == 0, result.stderr
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(docs) == 3
    assert [len(d["gpus"]) for d in docs] == [2, 2, 2]
    assert docs[0]["time"] < docs[1]["time"] < docs[2]["time"]


def test_stream_stops_quietly_when_the_reader_goes_away(driver):
    driver.write(training_box(1, []))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "stream", "-d", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=driver.env(),
    )
    proc.stdout.readline()
    proc.stdout.close()

    assert proc.wait(timeout=DEADLINE_S) == 0
    assert b"Traceback" not in proc.stderr.read()
