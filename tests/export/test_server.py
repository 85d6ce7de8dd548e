"""The HTTP endpoint: where it binds, and one-line errors for bad or busy addresses."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
import pytest

from gputop.export import DEFAULT_LISTEN, DEFAULT_PORT, server
from gputop.export.server import parse_listen
from tests.export.scrape import value
from tests.machines import GIB, training_box


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:9400", ("127.0.0.1", 9400)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9400", ("::1", 9400)),
        ("[::]:65535", ("::", 65535)),
    ],
)
def test_listen_is_host_and_port(text, address):
    assert parse_listen(text) == address


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("9400", "is not HOST:PORT"),
        (":9400", "names no host"),
        ("127.0.0.1:", "is not a port number"),
        ("127.0.0.1:http", "is not a port number"),
        ("127.0.0.1:65536", "is not a port number"),
        ("127.0.0.1:-1", "is not a port number"),
        ("::1:9400", "IPv6 address in brackets"),
    ],
)
def test_bad_listen_values_are_refused_with_the_reason(text, words):
    with pytest.raises(ValueError, match=words):
        parse_listen(text)


@pytest.mark.fast
def test_default_address_is_loopback_only():
    assert parse_listen(DEFAULT_LISTEN) == ("127.0.0.1", DEFAULT_PORT)


# The default ports of the exporters found on GPU nodes: node_exporter, NVIDIA's dcgm-exporter (every GPU Operator
# node), and the GPU exporters in Prometheus's list of exporter ports.
GPU_NODE_EXPORTER_PORTS = {
    9100: "node_exporter",
    9400: "dcgm-exporter",
    9401: "1-Wire exporter / nvidia_exporter",
    9445: "NVIDIA GPU exporter (mindprince)",
    9454: "NVIDIA SMI exporter",
    9788: "T-Rex NVIDIA GPU miner exporter",
    9835: "nvidia_gpu_exporter (utkuozdemir)",
    9971: "AMD SMI exporter",
    9996: "NVML exporter",
}


@pytest.mark.fast
def test_the_default_port_is_no_gpu_node_exporters_nor_one_training_jobs_take():
    assert DEFAULT_PORT not in GPU_NODE_EXPORTER_PORTS
    assert not 10_002 <= DEFAULT_PORT <= 19_999  # Ray's worker ports
    assert DEFAULT_PORT not in (29_400, 29_500)  # torchrun's rendezvous and master ports
    assert DEFAULT_PORT < 30_000  # Kubernetes' node ports, then the kernel's ephemeral ports


def export(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "export", *args], capture_output=True, text=True, env=env, timeout=20
    )


@pytest.mark.parametrize("listen", [":9400", "127.0.0.1:99999", "nohost"])
def test_a_bad_listen_value_is_one_line_and_exit_2(listen):
    result = export("--listen", listen)

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("gputop: error: --listen ")


def test_a_busy_port_is_one_line_and_exit_1(driver):
    driver.write(training_box(1, []))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        result = export("--listen", f"127.0.0.1:{port}", env=driver.env())

    assert result.returncode == 1
    assert result.stderr == (
        f"gputop: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another program serves there: give a free port with --listen HOST:PORT)\n"
    )


def test_by_default_a_busy_port_names_the_option_that_serves_elsewhere(driver):
    driver.write(training_box(1, []))
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            busy.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError:
            pytest.skip(f"port {DEFAULT_PORT} is in use on this machine")
        busy.listen()

        result = export(env=driver.env())

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"gputop: error: cannot listen on {DEFAULT_LISTEN}: ")
    assert "--listen HOST:PORT" in result.stderr


def test_an_unresolvable_host_is_one_line_and_exit_1(driver):
    result = export("--listen", "no-such-host.invalid:9400", env=driver.env())

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("gputop: error: cannot listen on no-such-host.invalid:9400: ")


def test_a_textfile_directory_that_does_not_exist_is_exit_2(tmp_path):
    result = export("--textfile", str(tmp_path / "missing"))

    assert result.returncode == 2
    assert result.stderr == f"gputop: error: --textfile '{tmp_path / 'missing'}' is not a directory\n"


def test_a_textfile_directory_that_cannot_be_written_is_exit_2_before_serving():
    result = export("--textfile", "/sys")  # no file can be made there, not even by root

    assert result.returncode == 2
    assert result.stderr == "gputop: error: cannot write --textfile '/sys': Permission denied\n"


def test_by_default_it_listens_on_the_default_port_of_loopback_only(driver, exporter):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError:
            pytest.skip(f"port {DEFAULT_PORT} is in use on this machine")
    driver.write(training_box(1, []))

    running = exporter()

    assert running.url == f"http://{DEFAULT_LISTEN}/metrics"
    listening = [c.laddr for c in psutil.Process(running.proc.pid).net_connections() if c.status == psutil.CONN_LISTEN]
    assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", DEFAULT_PORT)]


def test_serves_the_state_file_values_and_stops_cleanly_on_sigterm(driver, exporter):
    driver.write(training_box(2, []))
    running = exporter("--listen", "127.0.0.1:0", "-d", "0.2")

    samples = running.wait_for(lambda samples: value(samples, "gputop_gpu_up", gpu="1"))

    assert value(samples, "gputop_gpu_memory_used_bytes", gpu="1") == 25 * GIB
    assert value(samples, "gputop_last_sample_age_seconds") < 5
    code, err = running.stop()
    assert (code, err) == (0, "")


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


@pytest.mark.fast
async def test_connections_closed_for_room_are_told_once_then_counted_once_a_window(monkeypatch):
    monkeypatch.setattr(server, "EVICTION_NOTE_EVERY_S", 0.01)
    lines: list[str] = []
    notes = server._EvictionNotes(lines.append)

    for _ in range(1000):
        notes.evicted()
    assert len(lines) == 1 and lines[0].startswith("closed a connection")
    await until(lambda: len(lines) == 2)
    assert lines[1] == "closed 999 more connections that had sent no request, to keep at most 128 open"
    await until(lambda: notes._timer is None)  # a window with none closed ends the counting
    notes.evicted()
    assert len(lines) == 3 and lines[2].startswith("closed a connection")
    notes.close()
