"""A real Prometheus server (Debian's ``prometheus`` package) scrapes ``gputop export`` over the fake driver."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.conftest import FakeDriver
from tests.export.conftest import Exporter, start_exporter
from tests.export.dashboard import queries
from tests.export.scrape import names, parse
from tests.export.test_metrics import GPU, exposition, snapshot, training_view
from tests.factories import DEADLINE_S
from tests.machines import GIB, training_box

PROMETHEUS = "/usr/bin/prometheus"
SCRAPED_TIMEOUT_S = DEADLINE_S


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Prometheus:
    proc: subprocess.Popen
    port: int
    log: Path

    def query(self, expr: str) -> dict:
        """Prometheus's whole answer to an instant query (``status``, ``data`` or ``error``)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:  # a bad query is a 400 with the reason in the body
            return json.load(exc)

    def vector(self, expr: str) -> list[dict] | None:
        """The series ``expr`` selects now; None while the server is not up yet, or up but not ready (a 503 whose
        body, "Service Unavailable", is no JSON: a loaded machine starts Prometheus slowly)."""
        try:
            return self.query(expr)["data"]["result"]
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[tuple[Prometheus, Exporter]]:
    """gputop export over two fake H100s, and Prometheus scraping it every second until it holds their memory."""
    if not os.path.exists(PROMETHEUS):
        pytest.skip(f"{PROMETHEUS} is absent: install Debian's prometheus package (.ci/run does)")
    tmp = tmp_path_factory.mktemp("prometheus")
    driver = FakeDriver(tmp / "state.txt", "r550")
    driver.write(training_box(2, []))
    exporter = start_exporter(driver, "--listen", "127.0.0.1:0")
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: gputop\n"
        "    static_configs:\n"
        f"      - targets: ['{exporter.address}']\n"
    )
    log = tmp / "prometheus.log"
    port = free_port()
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(proc, port, log)
    try:
        # Both GPUs' memory, and SM activity, which every snapshot after the first has.
        deadline = time.monotonic() + SCRAPED_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            if len(server.vector("gputop_gpu_sm_activity_ratio") or ()) == 2:
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"Prometheus did not scrape gputop within {SCRAPED_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
        yield server, exporter
    finally:
        server.stop()
        exporter.stop()


def test_prometheus_holds_exactly_the_gpu_memory_of_the_state_file(scraped):
    server, exporter = scraped

    result = server.vector('gputop_gpu_memory_used_bytes{job="gputop"}')

    by_gpu = {r["metric"]["gpu"]: r for r in result}
    assert by_gpu["0"]["value"][1] == str(20 * GIB)
    assert by_gpu["1"]["value"][1] == str(25 * GIB)
    assert by_gpu["1"]["metric"]["uuid"] == "GPU-6a1b2c3d-0000-4000-8000-000000000001"
    assert by_gpu["1"]["metric"]["instance"] == exporter.address


def test_prometheus_sees_the_throttle_reason_and_the_sample_age(scraped):
    server, _ = scraped

    [throttled] = server.vector('gputop_gpu_throttle_reason{gpu="0", reason="sw_power_cap"}')
    [age] = server.vector("gputop_last_sample_age_seconds")

    assert throttled["value"][1] == "1"
    assert 0 <= float(age["value"][1]) < 5


def test_prometheus_holds_each_gpus_energy_counter_in_joules(scraped):
    server, _ = scraped

    result = server.vector("gputop_gpu_energy_joules_total")

    assert sorted((r["metric"]["gpu"], r["value"][1]) for r in result) == [("0", "2895.481"), ("1", "2895.481")]


@pytest.mark.parametrize("expr", queries())
def test_every_grafana_dashboard_query_is_valid_and_has_data(scraped, expr):
    server, _ = scraped

    answer = server.query(expr)

    assert answer["status"] == "success", answer.get("error")
    assert answer["data"]["result"], f"no data for {expr}"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) is absent")
def test_the_metrics_pass_promtools_naming_lint():
    snap = snapshot(gpus=(replace(GPU, energy_j=15636.0),), training=(training_view(),))
    text = exposition(snap, per_process=True)
    assert {"gputop_process_gpu_memory_bytes", "gputop_training_phase_seconds"} <= names(parse(text))

    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)

    assert (result.returncode, result.stdout + result.stderr) == (0, "")
