"""``/-/ready``, the Kubernetes readiness probe's path, asked of a real ``gputop export`` with a real HTTP client.

The first snapshot is held back by a driver that cannot be read yet: the fake driver's state file is a named pipe,
so the sampler waits in the driver until the test writes the state into it (as a driver slow to answer at boot).
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
from pathlib import Path

from tests.conftest import FakeDriver
from tests.export.conftest import Exporter, start_exporter
from tests.factories import wait_until
from tests.fakenvml.state import write_state
from tests.machines import training_box


def ask(exporter: Exporter, path: str, method: str = "GET") -> tuple[int, bytes]:
    host, port = exporter.address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def release(pipe: Path, state_file: Path) -> None:
    """Let the driver read ``state_file``'s state: the file takes the pipe's name (later reads find it), and the
    reader already waiting on the pipe gets the same state through it."""
    fd = wait_until(lambda: _open_writer(pipe), "the driver waiting on its state file")
    try:
        os.replace(state_file, pipe)
        os.write(fd, pipe.read_bytes())
    finally:
        os.close(fd)


def _open_writer(pipe: Path) -> int | None:
    """The pipe opened for writing; None while nothing reads it (ENXIO)."""
    try:
        return os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return None
        raise


def test_ready_is_503_until_the_first_snapshot_then_200(tmp_path):
    pipe = tmp_path / "state.txt"
    os.mkfifo(pipe)
    held = tmp_path / "state-ready.txt"
    write_state(held, training_box(1, []))
    exporter = start_exporter(FakeDriver(pipe, "r550"), "--listen", "127.0.0.1:0")
    try:
        before = ask(exporter, "/-/ready")
        metrics_before = ask(exporter, "/metrics")

        release(pipe, held)
        after = wait_until(lambda: (answer := ask(exporter, "/-/ready"))[0] == 200 and answer, "ready")
    finally:
        with contextlib.suppress(FileNotFoundError, OSError):
            if pipe.exists() and not pipe.is_file():  # never released: unblock the driver so the exporter can stop
                release(pipe, held)
        exporter.stop()

    assert before == (503, b"no snapshot yet\n")
    assert metrics_before[0] == 200 and b"gputop_gpu_up" not in metrics_before[1]
    assert after == (200, b"ready\n")


def test_ready_answers_head_without_a_body(exporter, driver):
    driver.write(training_box(1, []))
    running = exporter("--listen", "127.0.0.1:0")

    wait_until(lambda: ask(running, "/-/ready")[0] == 200, "ready")

    assert ask(running, "/-/ready", "HEAD") == (200, b"")
