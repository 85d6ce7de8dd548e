"""`gputop doctor` on every real machine we have a capture of: it runs to the end, says what each check found,
and explains every value the capture had as N/A."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeDriver
from tests.fakenvml.capture import fake_state, read_capture
from tests.integration.test_captures import CAPTURES, MEASURED, start_processes
from tests.integration.test_cli import gputop

CHECKS = {"driver", "gpus", "persistence", "processes", "proc", "pid_namespace", "mig", "gpm", "fields"}


def doctor(path: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> tuple[int, dict[str, Any], str]:
    capture = read_capture(path)
    driver = FakeDriver(tmp_path / "state.txt", capture.profile)
    driver.write(fake_state(capture, start_processes(capture, started)))
    result = gputop("doctor", "--json", env=driver.env())
    return result.returncode, json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_doctor_checks_every_captured_machine_and_explains_each_na(
    path: Path, tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    code, report, stderr = doctor(path, tmp_path, sleepers)

    assert code == 0, stderr  # a real machine that nvidia-smi could read is one gputop can monitor
    assert "Traceback" not in stderr
    checks = {c["id"]: c for c in report["checks"]}
    assert set(checks) >= CHECKS
    assert all(c["verdict"] in ("ok", "info", "limited", "skipped") for c in checks.values())
    capture = read_capture(path)
    assert report["checks"][0]["facts"]["gpu_count"] == len(capture.gpus)
    unreadable = {(u["field"], u["reason"]) for u in checks["fields"]["facts"]["unreadable"]}
    for gpu in capture.gpus:
        for field in MEASURED:
            if field in gpu.values and gpu.values[field] is None:  # N/A in the capture
                assert any(name == field for name, _ in unreadable), (field, unreadable)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_every_limit_on_a_captured_machine_has_a_fix_and_what_cannot_be_changed_has_none(
    path: Path, tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    _, report, _ = doctor(path, tmp_path, sleepers)

    for check in report["checks"]:
        if check["verdict"] == "limited":
            assert check["advice"], check
        if check["verdict"] == "info":
            assert check["advice"] == [] and check["info"], check
