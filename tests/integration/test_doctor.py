"""``gputop doctor`` and ``gputop doctor --json`` as a user runs them, against the fake driver in several states."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeState
from tests.integration.test_cli import no_driver_env
from tests.machines import training_box
from tests.mig_machines import mig_box


def doctor(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**env, "GPUTOP_PROBE_DIR": str(tmp_path / "probe")}
    return subprocess.run(
        [sys.executable, "-m", "gputop", "doctor", *args], capture_output=True, text=True, env=env, timeout=60
    )


def doctor_json(env: dict[str, str], tmp_path: Path) -> tuple[int, dict[str, Any]]:
    done = doctor(env, tmp_path, "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in doc["checks"]}


def state_driver(tmp_path: Path, state: FakeState, profile: str = "r550") -> FakeDriver:
    driver = FakeDriver(tmp_path / "state.txt", profile)
    driver.write(state)
    return driver


def test_healthy_box_text(tmp_path: Path) -> None:
    done = doctor(state_driver(tmp_path, training_box(2, [])).env(), tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = done.stdout
    assert "[ok]      NVIDIA driver and NVML: driver 550.90.07, 2 GPUs" in out
    assert "driver 550.90.07 (branch R550), NVML 12.550.90.07" in out
    assert "CUDA driver API 12.4, pynvml (nvidia-ml-py) " in out
    assert "[ok]      GPUs: 2 GPUs answering" in out
    assert "[ok]      Persistence mode and start-up time: on for GPU 0–1; nvmlInit took " in out
    assert "process lists come from nvmlDeviceGetComputeRunningProcesses_v3" in out
    assert "[ok]      GPM (SM activity): SM activity available on GPU 0–1" in out
    assert "fan_percent: unsupported on GPU 0–1" in out
    assert f"{tmp_path / 'probe'} does not exist yet" in out
    assert "[blocked]" not in out


def test_healthy_box_json(tmp_path: Path) -> None:
    status, doc = doctor_json(state_driver(tmp_path, training_box(2, [])).env(), tmp_path)

    assert status == 0
    assert (doc["doctor"], doc["exit_status"]) == (1, 0)
    checks = by_id(doc)
    assert list(checks) == [
        "driver",
        "gpus",
        "persistence",
        "processes",
        "proc",
        "pid_namespace",
        "mig",
        "gpm",
        "fields",
        "health",
        "probe_dir",
        "torch",
        "installation",
    ]
    driver = checks["driver"]["facts"]
    assert (driver["driver_version"], driver["branch"], driver["nvml_version"]) == ("550.90.07", "R550", "12.550.90.07")
    assert (driver["cuda_driver_version"], driver["gpu_count"]) == ("12.4", 2)
    assert driver["init_ms"] >= 0
    assert checks["persistence"]["facts"]["persistence"] == {"0": True, "1": True}
    assert checks["processes"]["facts"]["call_version"] == 3
    assert checks["fields"]["facts"]["unreadable"] == [
        {"owner": "gpu", "field": "fan_percent", "reason": "unsupported", "where": [0, 1]}
    ]
    for id in ("driver", "gpus", "persistence", "processes", "gpm", "health", "probe_dir", "installation"):
        assert checks[id]["verdict"] == "ok", checks[id]
    assert (checks["fields"]["verdict"], checks["fields"]["info"]) == ("info", ["fan_percent: unsupported on GPU 0–1"])
    assert checks["fields"]["advice"] == []


def test_persistence_off_is_a_limit_with_its_fix(tmp_path: Path) -> None:
    state = training_box(2, [])
    state.gpus[1].persistence_mode = 0
    done = doctor(state_driver(tmp_path, state).env(), tmp_path)

    assert done.returncode == 0
    assert "[limited] Persistence mode and start-up time: persistence mode is off on GPU 1" in done.stdout
    assert "fix: enable persistence mode" in done.stdout and "sudo nvidia-smi -pm 1" in done.stdout


def test_no_driver_blocks_with_one_clear_line(tmp_path: Path) -> None:
    done = doctor(no_driver_env(tmp_path), tmp_path)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "[blocked] NVIDIA driver and NVML: NVIDIA driver library libnvidia-ml.so.1 not found" in done.stdout
    assert "[skipped] Persistence mode and start-up time: not checked" in done.stdout
    assert done.stderr.splitlines() == [
        "gputop: monitoring is blocked: NVIDIA driver and NVML: NVIDIA driver library libnvidia-ml.so.1 not found: "
        "no NVIDIA driver is installed here, or this container was started without GPU access (docker run --gpus all)"
    ]
    status, doc = doctor_json(no_driver_env(tmp_path), tmp_path)
    assert (status, doc["verdict"], doc["exit_status"]) == (1, "blocked", 1)
    assert by_id(doc)["mig"]["verdict"] == "skipped"
    assert by_id(doc)["probe_dir"]["verdict"] == "ok"  # the checks that need no driver still run


@pytest.mark.parametrize(
    ("error", "says", "fix"),
    [
        ("DRIVER_NOT_LOADED", "NVIDIA driver is not loaded", "sudo modprobe nvidia"),
        ("LIB_RM_VERSION_MISMATCH", "NVIDIA driver/library version mismatch", "reboot"),
    ],
)
def test_init_error_blocks(tmp_path: Path, error: str, says: str, fix: str) -> None:
    status, doc = doctor_json(state_driver(tmp_path, FakeState(init_error=error)).env(), tmp_path)

    assert status == 1
    driver = by_id(doc)["driver"]
    assert driver["verdict"] == "blocked"
    assert driver["summary"].startswith(says)
    assert fix in driver["advice"][0]


def test_no_gpus_blocks(tmp_path: Path) -> None:
    status, doc = doctor_json(state_driver(tmp_path, FakeState()).env(), tmp_path)

    assert status == 1
    assert by_id(doc)["driver"]["summary"] == "NVML started but sees no GPU"


def test_old_branch_r470_has_no_gpm_and_no_v3_process_lists(tmp_path: Path) -> None:
    status, doc = doctor_json(state_driver(tmp_path, training_box(2, []), "r470").env(), tmp_path)

    assert status == 0
    checks = by_id(doc)
    assert checks["driver"]["verdict"] == "limited"
    assert checks["driver"]["facts"]["branch"] == "R470"
    assert checks["gpm"]["verdict"] == "limited"
    assert checks["gpm"]["summary"] == "R470 has no GPM (needs R520 or newer) on GPU 0–1"
    assert checks["processes"]["facts"]["call_version"] == 2
    assert "this driver has no _v3" in checks["processes"]["details"][0]
    fields = {(u["field"], u["reason"]) for u in checks["fields"]["facts"]["unreadable"]}
    assert ("sm_activity_percent", "not in this driver") in fields
    assert checks["fields"]["verdict"] == "limited"


def test_process_lists_refused(tmp_path: Path) -> None:
    state = training_box(2, [])
    for gpu in state.gpus:
        gpu.errors["nvmlDeviceGetComputeRunningProcesses"] = "NO_PERMISSION"
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    assert status == 0
    check = by_id(doc)["processes"]
    assert check["verdict"] == "limited"
    assert check["summary"] == "no permission to list the processes on GPU 0–1"
    assert "run gputop as root" in check["advice"][0]
    assert check["facts"]["per_gpu"] == {"0": "no permission", "1": "no permission"}


def test_a_lost_gpu(tmp_path: Path) -> None:
    state = training_box(2, [])
    state.gpus[1].errors = {"*": "GPU_IS_LOST"}
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    assert status == 0
    gpus = by_id(doc)["gpus"]
    assert gpus["verdict"] == "limited"
    assert gpus["summary"] == "1 GPU of 2 cannot be read: GPU 1"
    assert "nvidia-smi -r -i 1" in gpus["advice"][0]
    assert gpus["facts"]["gpus"][1]["state"] == "lost"


def test_every_gpu_lost_blocks(tmp_path: Path) -> None:
    state = training_box(1, [])
    state.gpus[0].errors = {"*": "GPU_IS_LOST"}
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    assert status == 1
    assert by_id(doc)["gpus"]["verdict"] == "blocked"


def test_with_every_gpu_lost_the_checks_that_ask_each_gpu_are_skipped_rather_than_ok(tmp_path: Path) -> None:
    state = training_box(1, [])
    state.gpus[0].errors = {"*": "GPU_IS_LOST"}
    done = doctor(state_driver(tmp_path, state).env(), tmp_path)

    assert done.returncode == 1
    for title in ("GPU process lists", "MIG (Multi-Instance GPU)", "GPM (SM activity)"):
        assert f"[skipped] {title}: not checked: no GPU answers (see the GPUs check)" in done.stdout


def test_fan_and_power_not_supported_collapse_per_field(tmp_path: Path) -> None:
    state = training_box(3, [])
    for gpu in state.gpus:
        gpu.errors["nvmlDeviceGetPowerUsage"] = "NOT_SUPPORTED"
    state.gpus[2].errors["nvmlDeviceGetTemperature"] = "NO_PERMISSION"
    done = doctor(state_driver(tmp_path, state).env(), tmp_path)

    assert done.returncode == 0
    assert "info: fan_percent, power_w: unsupported on GPU 0–2" in done.stdout
    assert "temperature_c: no permission on GPU 2" in done.stdout
    assert "[limited] Unreadable values (N/A) in a snapshot: 1 field N/A for a reason that can be fixed" in done.stdout
    assert "fix: run gputop as root" in done.stdout


def test_a_cpu_only_torch_is_known_without_importing_it() -> None:
    """Importing torch costs a second or more: a CPU-only build is read from its version.py alone."""
    code = (
        "import sys; from gputop.doctor.checks.pytorch import read_torch; view = read_torch(); "
        "print(view.version, view.cuda_build, view.cuda_available, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()

    assert out == [importlib.metadata.version("torch"), "None", "False", "False"]


def test_a_mig_box_lists_each_gpus_instances_by_profile(tmp_path: Path) -> None:
    code, doc = doctor_json(state_driver(tmp_path, mig_box()).env(), tmp_path)

    assert code == 0
    mig = by_id(doc)["mig"]
    assert mig["verdict"] == "ok"
    assert "GPU 0: MIG on, 3 instances: 3g.40gb, 2g.20gb, 1g.10gb" in mig["details"]
    assert mig["facts"]["0"]["profiles"] == ["3g.40gb", "2g.20gb", "1g.10gb"]


def test_another_projects_gputop_in_the_same_environment_is_named_with_the_way_out(tmp_path: Path) -> None:
    # What pip leaves of the other project's wheel: its metadata beside the packages it installed.
    site = tmp_path / "site"
    (site / "gputop-0.2.1.dist-info").mkdir(parents=True)
    (site / "gputop-0.2.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: gputop\nVersion: 0.2.1\n")
    env = state_driver(tmp_path, training_box(1, [])).env()

    alone = by_id(doctor_json(env, tmp_path)[1])["installation"]
    status, doc = doctor_json({**env, "PYTHONPATH": str(site)}, tmp_path)

    assert alone["verdict"] == "ok" and alone["facts"]["other_gputop"] is None
    check = by_id(doc)["installation"]
    assert status == 0 and check["verdict"] == "limited"
    assert check["facts"]["other_gputop"] == "0.2.1" and check["facts"]["other_location"] == str(site)
    assert "another project's gputop 0.2.1 is installed beside" in check["summary"]
    assert "pipx install gputop-ml" in check["advice"][0]


def test_a_mig_gpu_whose_own_list_is_roots_is_listed_through_its_instances_as_the_dashboard_lists_it(
    tmp_path: Path,
) -> None:
    state = mig_box(privileged=False, mig_unprivileged_processes="NO_PERMISSION")
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    check = by_id(doc)["processes"]
    assert (status, check["verdict"], check["advice"]) == (0, "ok", [])
    assert check["facts"]["per_gpu"]["0"] == 3 and check["facts"]["per_instance"] == [0]
    assert "GPU 0 in MIG mode: its instances' own lists answer" in check["details"][1]


def test_a_mig_gpu_that_refuses_every_list_is_a_limit_as_the_dashboard_says(tmp_path: Path) -> None:
    state = mig_box(privileged=False, mig_unprivileged_processes="NO_PERMISSION")
    state.gpus[0].errors["nvmlDeviceGetComputeRunningProcesses"] = "NO_PERMISSION"
    status, doc = doctor_json(state_driver(tmp_path, state).env(), tmp_path)

    check = by_id(doc)["processes"]
    assert (status, check["verdict"]) == (0, "limited")
    assert check["summary"] == "no permission to list the processes on GPU 0"
    assert "run gputop as root" in check["advice"][0]


def test_a_gpu_older_than_hopper_under_a_driver_without_gpm_has_no_gpm_as_information(tmp_path: Path) -> None:
    state = training_box(1, [])
    state.gpus[0].name, state.gpus[0].architecture = "Tesla T4", 6  # Turing: no driver gives it GPM
    status, doc = doctor_json(state_driver(tmp_path, state, "r515").env(), tmp_path)

    checks = by_id(doc)
    assert status == 0
    assert (checks["gpm"]["verdict"], checks["gpm"]["advice"]) == ("info", [])
    assert checks["gpm"]["summary"] == "GPU 0 has no GPM (Tesla T4: GPM needs Hopper or newer)"
    fields = {(u["field"], u["reason"]) for u in checks["fields"]["facts"]["unreadable"]}
    assert ("sm_activity_percent", "unsupported") in fields
    assert checks["fields"]["verdict"] == "info"
