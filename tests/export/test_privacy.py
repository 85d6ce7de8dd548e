"""What the exporter never shows: command lines, environment variables, user names; processes only on request."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.export.scrape import value
from tests.machines import GIB, training_box

SECRET_ARG = "--token=hunter2"
SECRET_ENV = ("GPUTOP_TEST_API_KEY", "s3cr3t-env-value")


@pytest.fixture
def secret_process() -> Iterator[subprocess.Popen]:
    """A GPU job whose command line and environment hold secrets."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", SECRET_ARG],
        env={**os.environ, SECRET_ENV[0]: SECRET_ENV[1]},
    )
    yield proc
    proc.kill()
    proc.wait()


def assert_no_secrets(text: str, pid: int) -> None:
    user = pwd.getpwuid(os.getuid()).pw_name
    for secret in (SECRET_ARG, "hunter2", *SECRET_ENV, f'"{user}"', "time.sleep"):
        assert secret not in text, f"{secret!r} leaked into the metrics"


def test_gputop_itself_sees_the_secret_command_line(driver, secret_process):
    """The premise of the tests below: the snapshot holds the secrets, and the exporter leaves them out."""
    driver.write(training_box(1, [secret_process.pid]))

    result = subprocess.run(
        [sys.executable, "-m", "gputop", "--json"], capture_output=True, text=True, env=driver.env(), timeout=30
    )

    [proc] = json.loads(result.stdout)["processes"]
    assert SECRET_ARG in proc["command"]
    assert proc["user"] == pwd.getpwuid(os.getuid()).pw_name


def test_default_output_has_no_process_series_command_line_environment_or_user(driver, exporter, secret_process):
    driver.write(training_box(1, [secret_process.pid]))
    running = exporter("--listen", "127.0.0.1:0")
    running.wait_for(lambda samples: value(samples, "gputop_gpu_memory_used_bytes", gpu="0"))

    text = running.scrape()

    assert_no_secrets(text, secret_process.pid)
    # As a number of its own (a label value, a sample), not as digits inside another number: one scrape's
    # gputop_scrape_duration_seconds read 0.023276805877685547 beside PID 2768.
    assert not re.search(rf"(?<![\w.]){secret_process.pid}(?!\w)", text), "the PID is in the metrics"
    assert "gputop_process_" not in text


def test_per_process_series_carry_gpu_and_pid_but_no_command_line(driver, exporter, secret_process):
    driver.write(training_box(1, [secret_process.pid]))
    running = exporter("--listen", "127.0.0.1:0", "--per-process")
    pid = str(secret_process.pid)

    samples = running.wait_for(lambda s: value(s, "gputop_process_gpu_memory_bytes", pid=pid))

    assert value(samples, "gputop_process_gpu_memory_bytes", gpu="0", pid=pid) == 6 * GIB
    labels = {frozenset(s.labels) for s in samples if s.name.startswith("gputop_process_")}
    assert labels == {frozenset({"gpu", "pid", "container"})}
    assert_no_secrets(running.scrape(), secret_process.pid)
