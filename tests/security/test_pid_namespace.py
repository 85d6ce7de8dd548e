"""gputop in a PID namespace of its own, as in a container without ``--pid=host``: NVML reports host PIDs, which
here name unrelated processes of the namespace or none. Real namespaces, made with util-linux's ``unshare`` (root).

Inside the new namespace the shell is PID 1 and its two ``sleep`` children are PIDs 2 and 3; the fake driver
reports GPU processes 2 and 3, as NVML did in the container where the dialog's SIGKILL once killed a local sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FakeDriver
from tests.machines import training_box

# Two unrelated local processes, PIDs 2 and 3 of the namespace, then gputop as its PID 1.
IN_THE_NAMESPACE = "sleep 300 & sleep 300 & exec {gputop}"


def _cannot(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"a PID namespace of its own is needed: {reason}")
    pytest.skip(f"a PID namespace of its own is needed: {reason}")


@pytest.fixture(scope="module")
def unshare() -> str:
    path = shutil.which("unshare")
    if path is None:
        _cannot("no unshare (util-linux) on this machine")
    if os.geteuid() != 0:
        _cannot("making one needs root")
    probe = subprocess.run([path, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        _cannot(f"unshare failed: {probe.stderr.strip()}")
    return path


def in_a_pid_namespace(unshare: str, driver: FakeDriver, *args: str) -> subprocess.CompletedProcess:
    gputop = " ".join([sys.executable, "-m", "gputop", *args])
    return subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "sh", "-c", IN_THE_NAMESPACE.format(gputop=gputop)],
        capture_output=True,
        text=True,
        env=driver.env(),
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )


def test_host_pids_that_name_local_processes_are_not_given_their_user_or_command(unshare, tmp_path):
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(training_box(1, [2, 3]))

    result = in_a_pid_namespace(unshare, driver, "--once", "--json")

    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["processes"]
    assert [row["pid"] for row in rows] == [2, 3]
    for row in rows:
        assert row["visible"] is False
        assert (row["user"], row["name"], row["command"], row["start_time"]) == (None, None, None, None)
        assert row["unavailable"]["command"] == "not in this PID namespace"


def test_the_doctor_says_the_pids_are_not_this_namespaces(unshare, tmp_path):
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(training_box(1, [2, 3]))

    result = in_a_pid_namespace(unshare, driver, "doctor", "--json")

    [check] = [c for c in json.loads(result.stdout)["checks"] if c["id"] == "pid_namespace"]
    assert check["facts"] == {"nested": True, "hidden_gpu_processes": 2}
    assert "never signalled" in check["summary"]
