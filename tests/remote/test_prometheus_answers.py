"""Prometheus's answers are untrusted: decoded with bounds, control characters shown, and every failure a one-line
reason; dcgm-exporter's series read in their own units."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gputop.remote.hostspec import HostSpec
from gputop.remote.prometheus.query import (
    MAX_ANSWER_BYTES,
    MAX_LABEL_CHARS,
    PrometheusError,
    Sample,
    decode_vector,
    http_query,
    server_url,
)
from gputop.remote.prometheus.readings import (
    ADVICE,
    DCGM_SAMPLED,
    DOWN,
    GPUTOP_SAMPLED,
    JOB_INFO,
    QUERIES,
    down_targets,
    fleet_findings,
    read_fleet,
)
from gputop.remote.prometheus.source import PrometheusFleet
from gputop.remote.status import STALE, UNREACHABLE, HostStatus
from gputop.ui.hosts.app import hosts_app
from gputop.ui.hosts.section import HostSection, HostSummary
from gputop.ui.process_rows import flat_rows
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import job_lines, jobs_across, section_lines
from gputop.ui.text.process_cells import cell_text
from tests.remote.host_scenes import ScriptedFleet
from tests.remote.test_hosts_view import lines_of

MIB = 1024**2


def vector(*series: tuple[dict[str, str], str]) -> bytes:
    result = [{"metric": labels, "value": [1700000000.0, value]} for labels, value in series]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


@pytest.mark.fast
def test_an_answer_is_decoded_into_labels_and_finite_values():
    data = vector(({"instance": "a:1", "gpu": "0"}, "42.5"), ({"gpu": "1"}, "NaN"), ({"gpu": "2"}, "+Inf"))

    assert decode_vector(data) == [Sample({"instance": "a:1", "gpu": "0"}, 42.5)]


@pytest.mark.fast
def test_control_characters_in_label_values_are_shown_not_obeyed_and_long_values_are_cut():
    [sample] = decode_vector(vector(({"Hostname": "node\x1b]0;owned\x07", "x": "y" * 100_000}, "1")))

    assert sample.labels["Hostname"] == "node\\x1b]0;owned\\x07"
    assert sample.labels["x"] == "y" * MAX_LABEL_CHARS


@pytest.mark.fast
def test_series_not_as_prometheus_writes_them_are_skipped():
    result = [
        {"metric": {"gpu": 0}, "value": [0, "1"]},
        {"metric": {"gpu": "0"}, "value": [0, 1]},
        {"metric": {"gpu": "0"}, "value": [0, "twelve"]},
        "a string",
        {"metric": {"gpu": "3"}, "value": [0, "3"]},
    ]
    data = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()

    assert decode_vector(data) == [Sample({"gpu": "3"}, 3.0)]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html>Grafana</html>", "not Prometheus's (not JSON)"),
        (b"[" * 100_000 + b"]" * 100_000, "not Prometheus's (not JSON)"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"status": "error", "error": "parse error\\n\\u001b[2J"}', "refused the query: parse error \\x1b[2J"),
        (b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', "not an instant vector"),
    ],
)
def test_an_answer_that_is_not_a_vector_is_a_one_line_reason(data, reason):
    with pytest.raises(PrometheusError) as error:
        decode_vector(data)

    assert reason in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("prometheus:9090", "give an http:// or https:// URL"),
        ("file:///etc/passwd", "give an http:// or https:// URL"),
        ("http://", "no host in the URL"),
        ("http://bob:secret@prom:9090", "a user or password in the URL is not supported"),
        ("http://prom:9090/?query=up", "without ?query"),
        ("http://prom:port", "the port is not a number"),
        ("http://prom\x1b[2J:9090", "not a URL"),
    ],
)
def test_a_bad_url_is_a_one_line_error(text, reason):
    with pytest.raises(PrometheusError, match=reason.replace("?", r"\?")):
        server_url(text)


@pytest.mark.fast
def test_a_good_url_keeps_its_path_prefix_without_the_trailing_slash():
    assert server_url("https://monitoring.example/prometheus/") == "https://monitoring.example/prometheus"


class Answers(BaseHTTPRequestHandler):
    status = 200
    body = b""

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Answers]]]:
    """A local HTTP server answering every query with ``Answers.status`` and ``Answers.body``."""
    handler = type("Handler", (Answers,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def test_a_huge_answer_is_refused_before_it_is_decoded(server):
    url, handler = server
    handler.body = b" " * (MAX_ANSWER_BYTES + 1)

    with pytest.raises(PrometheusError, match="bigger than 32 MiB: refused"):
        http_query(url)("up")


def test_an_error_page_is_said_in_one_line_with_prometheus_reason(server):
    url, handler = server
    handler.status = 400
    handler.body = (
        b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": 1:1: parse error"}'
    )

    with pytest.raises(PrometheusError) as error:
        http_query(url)("up{")

    assert str(error.value) == f'Prometheus at {url} answered 400: invalid parameter "query": 1:1: parse error'


def test_a_server_that_is_not_prometheus_stops_gputop_with_one_line_and_no_traceback(server):
    url, handler = server
    handler.body = b"<html>login</html>"

    result = subprocess.run(
        [sys.executable, "-m", "gputop", "--prometheus", url], capture_output=True, text=True, timeout=60
    )

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "gputop: error: the answer is not Prometheus's (not JSON): is the URL the server's?\n"


@pytest.mark.fast
def test_dcgm_exporter_series_are_read_in_their_units_where_gputop_does_not_report_the_host():
    labels = {"gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "dgx-3", "instance": "x"}
    answers = {
        DCGM_SAMPLED: [Sample(labels, 1700000000.0)],
        "DCGM_FI_DEV_FB_USED": [Sample(labels, 1000.0)],
        "DCGM_FI_DEV_FB_FREE": [Sample(labels, 80000.0)],
        "DCGM_FI_DEV_GPU_UTIL": [Sample(labels, 87.0)],
        "DCGM_FI_DEV_SM_CLOCK": [Sample(labels, 1410.0)],
        "DCGM_FI_DEV_POWER_USAGE": [Sample(labels, 312.5)],
        "DCGM_FI_DEV_GPU_TEMP": [Sample(labels, 61.0)],
    }

    [reading], _ = read_fleet(answers)

    [gpu] = reading.snapshot.gpus
    assert (reading.name, reading.source, reading.snapshot.time) == ("dgx-3", "dcgm-exporter", 1700000000.0)
    assert (gpu.uuid, gpu.name) == ("GPU-1", "NVIDIA A100-SXM4-80GB")
    assert (gpu.memory_used_bytes, gpu.memory_total_bytes) == (1000 * MIB, 81000 * MIB)
    assert (gpu.utilization_gpu_percent, gpu.clock_sm_mhz, gpu.power_w, gpu.temperature_c) == (87.0, 1410, 312.5, 61.0)


@pytest.mark.fast
def test_a_host_both_exporters_report_is_read_from_gputops_series_once():
    gputop = {"instance": "dgx-3:24400", "gpu": "0", "uuid": "GPU-1", "name": "A100"}
    dcgm = {"Hostname": "dgx-3", "gpu": "0"}
    answers = {GPUTOP_SAMPLED: [Sample(gputop, 1.0e9)], DCGM_SAMPLED: [Sample(dcgm, 1.0e9)]}

    readings, _ = read_fleet(answers)

    assert [(r.name, r.source) for r in readings] == [("dgx-3:24400", "gputop")]


@pytest.mark.fast
def test_impossible_values_are_not_shown():
    labels = {"instance": "a:1", "gpu": "0"}
    answers = {
        GPUTOP_SAMPLED: [Sample(labels, 1.0e9)],
        "gputop_gpu_busy_ratio": [Sample(labels, 7.0)],
        "gputop_gpu_memory_used_bytes": [Sample(labels, -5.0)],
        "gputop_gpu_temperature_celsius": [Sample(labels, 55.0)],
    }

    [reading], _ = read_fleet(answers)

    [gpu] = reading.snapshot.gpus
    assert (gpu.utilization_gpu_percent, gpu.memory_used_bytes, gpu.temperature_c) == (None, None, 55.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1.0e9

    def __call__(self) -> float:
        return self.now


def answers_at(sampled: float, *hosts: str) -> dict[str, list[Sample]]:
    return {query: [] for query in QUERIES} | {GPUTOP_SAMPLED: [Sample({"instance": host}, sampled) for host in hosts]}


@pytest.mark.fast
def test_a_host_whose_series_are_gone_stays_stale_and_is_live_again_with_its_next_sample():
    clock = Clock()
    fleet = PrometheusFleet("http://p", lambda expr: [], 1.0, clock)
    fleet.refresh(answers_at(clock.now - 1, "a:1", "b:1"))
    clock.now += 5

    [event] = fleet.refresh(answers_at(clock.now - 1, "a:1"))[1:]
    again = {e.name: e for e in fleet.refresh(answers_at(clock.now, "a:1", "b:1"))}

    assert (event.name, event.status.state, event.status.last_snapshot_at) == ("b:1", STALE, clock.now - 6)
    assert again["b:1"].status.state == "live" and again["b:1"].snapshot is not None


@pytest.mark.fast
def test_prometheus_not_answering_leaves_every_host_unreachable_with_the_reason():
    clock = Clock()
    fleet = PrometheusFleet("http://p", lambda expr: [], 2.0, clock)
    fleet.refresh(answers_at(clock.now, "a:1", "b:1"))

    events = fleet.unreachable("cannot reach Prometheus at http://p: Connection refused")

    assert {(e.name, e.status.state, e.status.retry_at) for e in events} == {
        ("a:1", UNREACHABLE, clock.now + 2),
        ("b:1", UNREACHABLE, clock.now + 2),
    }
    assert events[0].status.reason == "cannot reach Prometheus at http://p: Connection refused"


async def test_a_host_found_after_the_start_gets_a_section_of_its_own():
    clock = Clock()
    source = PrometheusFleet("http://p", lambda expr: [], 1.0, clock)
    first = source.refresh(answers_at(clock.now, "a:1"))
    fleet = ScriptedFleet((HostSpec("a:1"),), events=first, now=clock.now)
    app = hosts_app(fleet, user="alice")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for event in source.refresh(answers_at(clock.now, "a:1", "b:1")):
            fleet.push(event)
        await pilot.pause()
        await pilot.pause()

        sections = app.screen.query(HostSection)
        assert [s.host_name for s in sections] == ["a:1", "b:1"]
        assert [line[2:].split()[0] for line in lines_of(app.screen.query_one(HostSummary))[1:]] == ["a:1", "b:1"]


@pytest.mark.fast
def test_only_the_exporters_targets_that_are_down_are_hosts_not_every_target_prometheus_scrapes():
    answers = {
        GPUTOP_SAMPLED: [Sample({"instance": "gpu-1:24400", "job": "gpus"}, 1700000000.0)],
        DOWN: [
            Sample({"instance": "gpu-2:24400", "job": "gpus"}, 0.0),
            Sample({"instance": "gpu-3:9400", "job": "dcgm-exporter"}, 0.0),
            Sample({"instance": "gpu-1:9100", "job": "node"}, 0.0),
        ],
    }

    assert down_targets(answers) == ["gpu-2:24400", "gpu-3:9400"]


@pytest.mark.fast
def test_a_job_across_hosts_says_the_findings_the_exporters_of_its_hosts_report():
    rank = {"gpu": "0", "job_id": "3f9c01ab", "world_size": "2"}
    answers = {
        GPUTOP_SAMPLED: [Sample({"instance": host}, 1700000000.0) for host in ("a:24400", "b:24400")],
        JOB_INFO: [
            Sample({"instance": "a:24400", "rank": "0", **rank}, 1.0),
            Sample({"instance": "b:24400", "rank": "1", **rank}, 1.0),
        ],
        ADVICE: [Sample({"instance": "b:24400", "id": "data-starved", "severity": "warning"}, 1.0)],
    }
    readings, _ = read_fleet(answers)
    snaps = [(r.name, r.snapshot) for r in readings]

    (line,) = job_lines(jobs_across(snaps), 200, Palette(), {name: fleet_findings(snap) for name, snap in snaps})

    assert "2 ranks on a:24400 (1), b:24400 (1)" in line.plain
    assert "findings b:24400 data-starved (warning) on 1 process" in line.plain


@pytest.mark.fast
@pytest.mark.parametrize("digit", ["²", "٣"], ids=["superscript", "arabic-indic"])
def test_a_label_of_digits_in_another_script_is_not_a_number_and_the_other_hosts_are_read(digit):
    # Python's str.isdigit() takes "²" and "٣", and int() then raises: one hostile target's labels, relayed by
    # Prometheus, must cost only its own bad series, never the refresh of every host.
    bad = {"instance": "evil:24400", "gpu": digit}
    good = {"instance": "good:24400", "gpu": "0"}
    process = {"instance": "evil:24400", "gpu": "0", "pid": digit}
    rank = {"instance": "evil:24400", "gpu": "0", "job_id": "j", "pid": "7", "rank": digit, "world_size": "2"}
    answers = {
        GPUTOP_SAMPLED: [Sample({"instance": "evil:24400"}, 1.0e9), Sample({"instance": "good:24400"}, 1.0e9)],
        "gputop_gpu_up": [Sample(bad, 1.0), Sample({**bad, "gpu": "0"}, 1.0), Sample(good, 1.0)],
        "gputop_gpu_temperature_celsius": [Sample(bad, 55.0), Sample(good, 56.0)],
        "gputop_process_gpu_memory_bytes": [Sample(process, 1.0e9)],
        JOB_INFO: [Sample(rank, 1.0)],
    }

    readings, _ = read_fleet(answers)

    by_name = {r.name: r.snapshot for r in readings}
    assert [g.temperature_c for g in by_name["good:24400"].gpus] == [56.0]
    assert [g.index for g in by_name["evil:24400"].gpus] == [0]
    assert by_name["evil:24400"].processes == () and by_name["evil:24400"].training == ()


@pytest.mark.fast
def test_a_process_read_from_an_exporter_says_its_names_are_not_exported_in_the_section_and_the_table():
    labels = {"instance": "gpu-7:24400", "gpu": "5", "pid": "4106"}
    answers = {
        GPUTOP_SAMPLED: [Sample({"instance": "gpu-7:24400"}, 1.0e9)],
        "gputop_gpu_up": [Sample({"instance": "gpu-7:24400", "gpu": "5"}, 1.0)],
        "gputop_process_gpu_memory_bytes": [Sample(labels, 69.0 * 1024**3)],
        "gputop_process_sm_ratio": [Sample(labels, 0.68)],
    }

    [reading], _ = read_fleet(answers)

    [row] = flat_rows(reading.snapshot)
    assert (cell_text(row, "command"), cell_text(row, "gpu_mem"), cell_text(row, "sm")) == (
        "(names not exported)",
        "69.0GiB",
        "68%",
    )
    status = HostStatus("gpu-7:24400", state="live", last_snapshot_at=1.0e9)
    [line] = [
        t.plain for t in section_lines(status, reading.snapshot, None, 1.0e9, 160, Palette()) if "4106" in t.plain
    ]
    assert line.split() == ["5", "4106", "-", "69.0GiB", "68%", "N/A", "names", "not", "exported"]


@pytest.mark.fast
@pytest.mark.parametrize(("label", "shown"), [("550.144.03", "550.144.03"), ("5\x1b[2J", None), ("", None)])
def test_a_dcgm_exporter_hosts_driver_is_read_from_the_label_on_its_series(label, shown):
    # dcgm-exporter 3.3 and later label every series with DCGM_FI_DRIVER_VERSION (NVIDIA/dcgm-exporter#490 shows
    # DCGM_FI_DRIVER_VERSION="550.144.03" on DCGM_FI_DEV_GPU_UTIL); anything not of a version's form is not read.
    labels = {"gpu": "0", "UUID": "GPU-1", "Hostname": "dgx-3", "DCGM_FI_DRIVER_VERSION": label}
    answers = {DCGM_SAMPLED: [Sample(labels, 1700000000.0)], "DCGM_FI_DEV_GPU_UTIL": [Sample(labels, 87.0)]}

    [reading], _ = read_fleet(answers)

    assert reading.snapshot.driver.driver_version == shown
