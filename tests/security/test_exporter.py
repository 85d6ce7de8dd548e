"""``gputop export`` under hostile clients and faults: idle and trickling connections, many scrapers at once,
SIGTERM at any moment, a symlink planted in a shared textfile directory, and a sampling thread that dies.

Every test runs the real exporter as a subprocess over the fake driver, on loopback only.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gputop.export.server import EVICTION_NOTE_EVERY_S, MAX_CONNECTIONS
from tests.conftest import FakeDriver
from tests.export.conftest import START_TIMEOUT_S, Exporter, start_exporter
from tests.export.scrape import parse, value
from tests.factories import DEADLINE_S, wait_until
from tests.machines import training_box
from tests.security.conftest import LocalUser

# Prometheus's default scrape_timeout: a scrape that takes longer than this is a failed scrape.
PROMETHEUS_SCRAPE_TIMEOUT_S = 10.0
# How long a test waits for the exporter to close a connection on its own: well above its documented limits.
CLOSE_WAIT_S = 20.0
# 45 tries once let the exporter survive SIGTERM; GPUTOP_SIGTERM_ROUNDS lengthens or shortens the loop.
SIGTERM_ROUNDS = int(os.environ.get("GPUTOP_SIGTERM_ROUNDS", "45"))
LIBC = ctypes.CDLL(None, use_errno=True)


@pytest.fixture
def driver(tmp_path: Path) -> FakeDriver:
    """A fake driver for the exporter subprocesses only."""
    return FakeDriver(tmp_path / "state.txt", "r550")


@pytest.fixture
def exporter(driver: FakeDriver) -> Iterator[Callable[..., Exporter]]:
    """Start ``gputop export ARGS`` over ``driver``; stopped at the end of the test."""
    started: list[Exporter] = []

    def start(*args: str) -> Exporter:
        started.append(start_exporter(driver, *args))
        return started[-1]

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def running(driver: FakeDriver, exporter: Callable[..., Exporter]) -> Exporter:
    """An exporter on a free loopback port that already serves a snapshot."""
    driver.write(training_box(2, []))
    started = exporter("--listen", "127.0.0.1:0", "-d", "0.2")
    started.wait_for(lambda samples: value(samples, "gputop_gpu_up", gpu="1"))
    return started


def port_of(running: Exporter) -> int:
    return int(running.address.rsplit(":", 1)[1])


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def closed_by_peer(conn: socket.socket) -> bool:
    """Whether the other end has closed ``conn`` (end of file or reset); reads and drops anything it sent first."""
    try:
        while select.select([conn], [], [], 0)[0]:
            if not conn.recv(65536):
                return True
    except ConnectionError:
        return True
    return False


def test_idle_connections_take_no_thread_each_and_are_closed(running):
    port = port_of(running)
    before = threads_of(running.proc.pid)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(60)]
    try:
        # Connections are accepted in order: once this scrape is answered, all 60 idle ones have been accepted.
        running.scrape()
        during = threads_of(running.proc.pid)

        assert during - before < 10, f"{during - before} more threads for 60 idle connections"
        wait_until(lambda: all(closed_by_peer(conn) for conn in idle), timeout_s=CLOSE_WAIT_S, every_s=0.2)
    finally:
        for conn in idle:
            conn.close()
    assert running.samples()


def test_idle_connections_beyond_the_limit_do_not_lock_scrapers_out(running):
    port = port_of(running)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(MAX_CONNECTIONS + 22)]
    try:
        for _ in range(5):
            assert value(running.samples(), "gputop_gpu_up", gpu="1") == 1
    finally:
        for conn in idle:
            conn.close()


def test_closing_idle_connections_over_the_limit_is_a_line_a_minute_not_a_traceback_each(running):
    port = port_of(running)
    over = 4 * MAX_CONNECTIONS
    started = time.monotonic()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(MAX_CONNECTIONS + over)]
    try:
        # Accepted in order: once this scrape is answered, every idle one before it has been accepted.
        running.scrape()
        wait_until(lambda: sum(closed_by_peer(conn) for conn in idle) >= over, timeout_s=CLOSE_WAIT_S, every_s=0.2)
    finally:
        for conn in idle:
            conn.close()
    code, err = running.stop()
    minutes = (time.monotonic() - started) // EVICTION_NOTE_EVERY_S

    assert code == 0
    assert "Traceback" not in err and "CancelledError" not in err
    # The first closing at once; the others counted, told once a minute and when the exporter stops.
    first, *rest = err.splitlines()
    assert first.startswith("gputop: closed a connection that had sent no request, to keep at most 128 open")
    assert 1 <= len(rest) <= 1 + minutes, err[:2000]
    more = r"gputop: closed \d+ more connections that had sent no request, to keep at most 128 open"
    assert all(re.fullmatch(more, line) for line in rest), rest


def test_stopping_with_idle_connections_open_says_nothing(running):
    # One fewer than the limit: the scrape makes room for itself without closing any.
    idle = [socket.create_connection(("127.0.0.1", port_of(running)), timeout=5) for _ in range(MAX_CONNECTIONS - 1)]
    try:
        running.scrape()
        code, err = running.stop()
    finally:
        for conn in idle:
            conn.close()

    assert (code, err) == (0, "")


def test_a_request_trickled_byte_by_byte_is_dropped(running):
    conn = socket.create_connection(("127.0.0.1", port_of(running)), timeout=5)
    try:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ")
        deadline = time.monotonic() + CLOSE_WAIT_S
        dropped = False
        while not dropped and time.monotonic() < deadline:
            try:
                conn.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                dropped = True
            dropped = dropped or closed_by_peer(conn)
            time.sleep(0.2)
    finally:
        conn.close()

    assert dropped, f"a connection sending one byte every 0.2 s was still open after {CLOSE_WAIT_S:g} s"
    assert running.samples()


def listen_drops() -> int:
    """Connections the kernel dropped in this network namespace because an accept queue was full."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines() if line.startswith("TcpExt:")]
    names, values = lines
    return int(values[names.index("ListenDrops")])


def status_of(port: int, request: bytes) -> str:
    """The status code the exporter answers ``request`` with; "" when it answers with no HTTP status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    status_line = answer.partition(b"\r\n")[0].decode("latin-1").split(" ")
    return status_line[1] if status_line[0].startswith("HTTP/1.") else ""


@pytest.mark.parametrize(
    ("request_", "status"),
    [
        pytest.param(b"\x00\xff\xfe garbage\r\n\r\n", "400", id="not-http"),
        pytest.param(b"GET http://[::1/metrics HTTP/1.1\r\n\r\n", "400", id="unclosed-ipv6-bracket"),
        pytest.param(b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", "405", id="post"),
        pytest.param(b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", "404", id="other-path"),
        pytest.param(b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", "431", id="101-fields"),
        pytest.param(b"GET /metrics HTTP/1.1\r\nX-A: " + b"a" * 100_000, "431", id="100-kb-field"),
        pytest.param(b"GET /metrics?name[]=gputop_gpu_up HTTP/1.0\r\n\r\n", "200", id="http-1.0-with-query"),
    ],
)
def test_malformed_requests_get_an_error_and_the_endpoint_goes_on(running, request_, status):
    assert status_of(port_of(running), request_) == status
    assert value(running.samples(), "gputop_gpu_up", gpu="1") == 1
    assert running.stop() == (0, "")


def test_50_concurrent_scrapers_all_get_the_metrics(running):
    clients, rounds = 50, 20
    drops_before = listen_drops()
    gate = threading.Barrier(clients)
    failures: list[str] = []

    def scrape_repeatedly() -> None:
        gate.wait()
        for _ in range(rounds):
            try:
                with urllib.request.urlopen(running.url, timeout=PROMETHEUS_SCRAPE_TIMEOUT_S) as response:
                    parse(response.read().decode())
            except (OSError, ValueError) as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=scrape_repeatedly) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == [], f"{len(failures)} of {clients * rounds} scrapes failed, e.g. {failures[0]}"
    # A dropped connection is retried by the client's kernel a second or more later, so it may still succeed.
    assert listen_drops() == drops_before, "connections were dropped because the accept queue was full"


def nobody_listens_on(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def sigterm_to_a_thread_other_than_main(pid: int, round_: int) -> None:
    """SIGTERM as the kernel may deliver a process-directed signal: to any thread that does not block it."""
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    assert others, "the exporter has no thread besides the main one"
    if LIBC.tgkill(pid, others[round_ % len(others)], signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


def exit_of(proc: subprocess.Popen) -> tuple[int, str]:
    """The exit status and the rest of stderr of a process told to stop; killed if it has not within the deadline."""
    try:
        _, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def sigterm_round(driver: FakeDriver, textfiles: Path, round_: int) -> tuple[Exporter, int, str]:
    """Start an exporter, let it serve (and, every other round, write the textfile), SIGTERM it at a moment that
    depends on the round; it, its exit status and the rest of its stderr."""
    writing = ("--textfile", str(textfiles)) if round_ % 2 else ()
    running = start_exporter(driver, "--listen", "127.0.0.1:0", *writing, "-d", "0.1")
    try:
        if writing:
            wait_until(lambda: (textfiles / "gputop.prom").exists())
        else:
            running.scrape()
        # Land the signal at different moments of the sampling and writing cycle.
        time.sleep(round_ % 7 * 0.007)
        if round_ % 4 >= 2:
            sigterm_to_a_thread_other_than_main(running.proc.pid, round_)
            code, err = exit_of(running.proc)
        else:
            code, err = running.stop()
    finally:
        if running.proc.poll() is None:
            running.proc.kill()
            running.proc.wait()
    return running, code, err


def test_sigterm_always_stops_it_cleanly(driver, tmp_path):
    driver.write(training_box(1, []))
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    # Two rounds at a time, one serving alone and one serving and writing the textfile (whose main thread wakes at
    # every snapshot); both have ended before either's port and the textfile directory are checked, so no
    # exporter of the next pair can hold the port a checked one had.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for first in range(0, SIGTERM_ROUNDS, 2):
            pair = range(first, min(first + 2, SIGTERM_ROUNDS))
            ended = list(pool.map(lambda round_: sigterm_round(driver, textfiles, round_), pair))
            for round_, (running, code, err) in zip(pair, ended):
                assert code == 0, f"round {round_}: exit status {code}, stderr {err!r}"
                assert "Traceback" not in err, f"round {round_}: {err}"
                assert nobody_listens_on(port_of(running)), f"round {round_}: the port is still served"
            assert list(textfiles.iterdir()) == [], f"rounds {pair}: left {[p.name for p in textfiles.iterdir()]}"


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A textfile directory every local user can write to (mode 0777, no sticky bit), as some installs have."""
    path = Path(tempfile.mkdtemp(prefix="gputop-textfiles-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


def plant_symlinks_as(user: LocalUser, directory: Path, target: Path, seconds: float) -> int:
    """As ``user``: watch ``directory`` for gputop's temporary files and plant a symlink to ``target`` under each
    name seen, once the name is free again, until three are planted. Returns how many were.

    A fork rather than a new interpreter, which the other user may not be allowed to run.
    """
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        planted = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            seen: set[str] = set()
            deadline = time.monotonic() + seconds
            while planted < 3 and time.monotonic() < deadline:
                seen.update(n for n in os.listdir(directory) if "gputop.prom" in n and n != "gputop.prom")
                for name in list(seen):
                    try:
                        os.symlink(target, directory / name)
                    except FileExistsError:  # still gputop's file: try again once it is renamed
                        continue
                    seen.discard(name)
                    planted += 1
        finally:
            os.write(write_end, str(planted).encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as result:
        planted_text = result.read()
    os.waitpid(child, 0)
    return int(planted_text or 0)


def test_a_symlink_planted_in_a_shared_textfile_directory_is_never_followed(
    driver, exporter, shared_dir, tmp_path, other_user
):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    driver.write(training_box(1, []))
    exporter("--textfile", str(shared_dir), "-d", "0.1")
    wait_until(lambda: (shared_dir / "gputop.prom").exists())

    planted = plant_symlinks_as(other_user, shared_dir, victim, seconds=8.0)
    # One more write at least: the one that would follow a planted link.
    last = os.lstat(shared_dir / "gputop.prom").st_ino
    wait_until(lambda: os.lstat(shared_dir / "gputop.prom").st_ino != last)

    assert planted > 0, "the attacker saw no temporary file to imitate"
    assert victim.read_text() == "root's file\n"
    assert not (shared_dir / "gputop.prom").is_symlink()
    assert parse((shared_dir / "gputop.prom").read_text())


# The script the exporter runs for the next test: its sampling thread dies after a few snapshots, the way it did
# with ``-d 1e308`` (an exception that Sampler does not catch).
SAMPLER_DIES = """
import sys
from gputop.collect.sampler import SnapshotMaker
from gputop.cli import main

class SamplerKilled(BaseException):
    pass

taken = 0
original = SnapshotMaker.snapshot

def snapshot(self, *args, **kwargs):
    global taken
    taken += 1
    if taken > 3:
        raise SamplerKilled
    return original(self, *args, **kwargs)

SnapshotMaker.snapshot = snapshot
raise SystemExit(main(sys.argv[1:]))
"""


def test_when_the_sampling_thread_dies_it_stops_instead_of_serving_stale_metrics(driver, tmp_path):
    driver.write(training_box(1, []))
    args = ["export", "--listen", "127.0.0.1:0", "--textfile", str(tmp_path), "-d", "0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", SAMPLER_DIES, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=driver.env(),
    )
    try:
        _, err = proc.communicate(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the exporter went on serving after its sampling thread died")

    assert proc.returncode == 1
    assert "gputop: error: the sampling thread stopped" in err
    assert list(tmp_path.iterdir()) == [tmp_path / "state.txt"]
