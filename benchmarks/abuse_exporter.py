"""Scrape latency of `gputop export` under many concurrent scrapers, over the fake driver with 8 GPUs.

The real exporter runs as a subprocess on loopback; `concurrency` clients (on one event loop, so that the
measure is not the wait of client threads for the GIL) each send Prometheus's own request (OpenMetrics accepted,
gzip) on a fresh connection, one after another, until `requests` scrapes are done. Latency is from connect to the
end of the response.

With ``--idle N``, it opens N idle connections instead (beyond the cap of 128, each closes an older one), scrapes
once, stops the exporter and counts what it wrote on stderr after its first line.

usage: python benchmarks/abuse_exporter.py [--concurrency 50] [--requests 2000] [--idle 1128]
Targets (docs/exporter.md): p99 under 100 ms with 50 concurrent scrapers; a few lines of stderr for any number of
idle connections.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakenvml.build import build
from tests.fakenvml.state import write_state
from tests.machines import training_box

GPUS = 8
START_TIMEOUT_S = 20.0
REQUEST_TIMEOUT_S = 10.0
# What Prometheus 2.x and 3.x send with every scrape.
ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def scrape(port: int) -> tuple[float, bool]:
    """One scrape on a fresh connection: its latency in ms and whether the answer was a 200."""
    request = (
        f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {ACCEPT}\r\n"
        "Accept-Encoding: gzip\r\nUser-Agent: abuse-exporter\r\nConnection: close\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), REQUEST_TIMEOUT_S)
        try:
            writer.write(request)
            answer = await asyncio.wait_for(reader.read(), REQUEST_TIMEOUT_S)
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError):
        return (time.perf_counter() - started) * 1000, False
    return (time.perf_counter() - started) * 1000, answer.startswith((b"HTTP/1.1 200 ", b"HTTP/1.0 200 "))


async def scrape_concurrently(port: int, concurrency: int, requests: int) -> tuple[list[float], int, float]:
    """``requests`` scrapes from ``concurrency`` clients, each one after another: latencies, failures, seconds."""
    latencies: list[float] = []
    failed = 0

    async def client(count: int) -> None:
        nonlocal failed
        for _ in range(count):
            took, ok = await scrape(port)
            latencies.append(took)
            failed += not ok

    for _ in range(20):
        await scrape(port)
    started = time.perf_counter()
    await asyncio.gather(*(client(requests // concurrency + (i < requests % concurrency)) for i in range(concurrency)))
    return latencies, failed, time.perf_counter() - started


def start_exporter(env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """`gputop export` on a free loopback port, once it serves a snapshot of every GPU."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "export", "--listen", "127.0.0.1:0", "-d", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], START_TIMEOUT_S)
    line = proc.stderr.readline() if ready else ""
    if "/metrics" not in line:
        proc.kill()
        raise RuntimeError(f"gputop export did not start: {line!r}")
    port = int(line.rsplit(":", 1)[-1].removesuffix("/metrics\n"))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as conn:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            text = b""
            while chunk := conn.recv(65536):
                text += chunk
        if text.count(b"gputop_gpu_up{") == GPUS:
            return proc, port
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gputop export served no snapshot")


def fake_driver_env(tmp: str) -> dict[str, str]:
    """The environment of an exporter over the fake driver with ``GPUS`` GPUs, its state file in ``tmp``."""
    state_path = Path(tmp) / "state.txt"
    write_state(state_path, training_box(GPUS, []))
    # The fake re-parses a state file younger than 2 s at every call (mtime granularity), which would
    # measure the fake's parser instead of gputop.
    time.sleep(2.1)
    return {
        **os.environ,
        "LD_LIBRARY_PATH": str(build("r550")),
        "FAKE_NVML_STATE": str(state_path),
        "PYTHONUNBUFFERED": "1",
    }


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def exporter_p99_ms(concurrency: int = 50, requests: int = 2000) -> dict[str, float | int]:
    """Run `requests` scrapes from `concurrency` clients at once against a real exporter; their latency in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_exporter(fake_driver_env(tmp))
        try:
            latencies, failed, elapsed = asyncio.run(scrape_concurrently(port, concurrency, requests))
        finally:
            stop(proc)
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "failed": failed,
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
        "scrapes_per_s": round(len(latencies) / elapsed, 1),
    }


def idle_connections_log(idle: int = 1128) -> dict[str, float | int]:
    """Open ``idle`` connections that send nothing, scrape once, stop: the lines the exporter wrote on stderr, read
    as they come (as journald reads a service's)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_exporter(fake_driver_env(tmp))
        assert proc.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
        reader.start()
        conns = []
        try:
            started = time.perf_counter()
            conns = [socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) for _ in range(idle)]
            with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as conn:
                conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                while conn.recv(65536):
                    pass
            elapsed = time.perf_counter() - started
        finally:
            for conn in conns:
                conn.close()
            proc.terminate()
            proc.wait(10)
            reader.join(10)
    return {"idle": idle, "stderr_lines": len(lines), "seconds": round(elapsed, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--idle", type=int, help="open this many idle connections and count the log's lines")
    args = parser.parse_args()
    print(exporter_p99_ms(args.concurrency, args.requests) if args.idle is None else idle_connections_log(args.idle))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
