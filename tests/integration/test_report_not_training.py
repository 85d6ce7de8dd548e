"""`gputop report --pid` on a process that shows no training evidence: it says so, which evidence is missing, and
what gputop can still tell of the process, instead of a bare "no findings"."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import GIB, h100

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def report(pid: int, driver: FakeDriver, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "report", "--pid", str(pid), "--seconds", "2", "--window", "1", *extra],
        capture_output=True,
        text=True,
        env=driver.env(),
        timeout=60,
    )


@pytest.fixture
def holder(tmp_path, sleepers) -> tuple[int, FakeDriver]:
    """A real ``sleep`` that the fake driver lists with 3 GiB on a GPU 40 % busy."""
    proc = subprocess.Popen(["sleep", "300"])
    sleepers.append(proc)
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(FakeState(gpus=[h100(0, util_gpu=40, processes=[FakeProcess(proc.pid, 3 * GIB)])]))
    return proc.pid, driver


def test_a_process_without_training_evidence_is_reported_as_not_a_training_process(holder):
    pid, driver = holder

    done = report(pid, driver)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == (
        f"Not a training process: PID {pid} showed no training evidence in "
        f"{lines[0].split(', ')[1].split()[0]} snapshots, so only the GPU rules judged it."
    )
    assert lines[2] == (
        "  missing: no report from gputop's probe, no DataLoader workers, no launcher rank (torchrun's RANK), "
        "no threads torch names (pt_main_thread, pt_autograd_N)"
    )
    assert lines[3] == "  sleep: sleep 300"
    assert lines[4].startswith("  GPU 0 (NVIDIA H100 80GB HBM3): 3.00GiB held; the GPU busy 40% on average, 40% at")
    assert lines[5].startswith("  CPU 0% of a core on average")
    assert "gputop run -- CMD" in lines[6]
    assert lines[-1] == "No findings from the GPU rules: nothing held long enough to report."


def test_the_json_report_says_what_evidence_is_missing_and_what_the_process_used(holder):
    pid, driver = holder

    done = report(pid, driver, "--json")

    assert done.returncode == 0, done.stderr
    process = json.loads(done.stdout)["process"]
    assert (process["pid"], process["name"], process["command"]) == (pid, "sleep", "sleep 300")
    assert (process["trains"], process["evidence"]) == (False, [])
    assert process["missing_evidence"] == ["probe report", "DataLoader workers", "launcher rank", "torch threads"]
    (gpu,) = process["gpus"]
    assert (gpu["index"], gpu["memory_bytes"], gpu["busy_percent_mean"], gpu["busy_percent_max"]) == (
        0,
        3 * GIB,
        40.0,
        40,
    )
    assert process["gpus_unknown"] is None and process["rss_bytes"] > 0
