"""A real Prometheus server (Debian's ``prometheus`` package) scrapes ``gputop export`` over the fake driver."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.conftest import FakeDriver
from tests.export.conftest import Exporter, start_exporter
from tests.export.dashboard import queries
from tests.export.scrape import names, parse
from tests.export.test_metrics import GPU, exposition, snapshot, training_view
from tests.machines import GIB, training_box
from tests.prometheus_server import PROMETHEUS, Prometheus, start_prometheus, wait_scraped


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[tuple[Prometheus, Exporter]]:
    """gputop export over two fake H100s, and Prometheus scraping it every second until it holds their memory."""
    if not os.path.exists(PROMETHEUS):
        pytest.skip(f"{PROMETHEUS} is absent: install Debian's prometheus package (.ci/run does)")
    tmp = tmp_path_factory.mktemp("prometheus")
    driver = FakeDriver(tmp / "state.txt", "r550")
    driver.write(training_box(2, []))
    exporter = start_exporter(driver, "--listen", "127.0.0.1:0")
    server = start_prometheus(tmp, {"gputop": [exporter.address]})
    try:
        # Both GPUs' memory, and SM activity, which every snapshot after the first has.
        wait_scraped(server, lambda p: len(p.vector("gputop_gpu_sm_activity_ratio") or ()) == 2, "gputop")
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
