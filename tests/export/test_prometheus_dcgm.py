"""A real Prometheus scrapes ``gputop export --dcgm-labels`` and a dcgm-exporter's text side by side: the two join on
``UUID``, and every PromQL example of docs/exporter.md is a query Prometheus takes.

The dcgm-exporter text has the label layout dcgm-exporter 4 writes (tests/data/kubernetes/SOURCES.md), with the
fake GPUs' UUIDs, so that the join has something to find.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import FakeDriver
from tests.export.conftest import Exporter, start_exporter
from tests.machines import training_box
from tests.prometheus_server import PROMETHEUS, Prometheus, start_prometheus, wait_scraped

DOCS = Path(__file__).resolve().parents[2] / "docs" / "exporter.md"
NODE = "gpu-node-07"
UUIDS = ("GPU-6a1b2c3d-0000-4000-8000-000000000000", "GPU-6a1b2c3d-0000-4000-8000-000000000001")


def dcgm_text() -> bytes:
    """Two GPUs' utilisation and temperature as dcgm-exporter writes them."""
    lines = []
    for metric, help_text, value in (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", 87),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", 61),
    ):
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for index, uuid in enumerate(UUIDS):
            lines.append(
                f'{metric}{{gpu="{index}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + index:02X}:00.0",'
                f'device="nvidia{index}",modelName="NVIDIA H100 80GB HBM3",Hostname="{NODE}",'
                f'DCGM_FI_DRIVER_VERSION="550.90.07"}} {value}'
            )
    return ("\n".join(lines) + "\n").encode()


class _DcgmExporter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = dcgm_text()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def joined(tmp_path_factory) -> Iterator[tuple[Prometheus, Exporter]]:
    """Prometheus scraping gputop (--dcgm-labels, NODE_NAME set) and a dcgm-exporter until it holds both."""
    if not os.path.exists(PROMETHEUS):
        pytest.skip(f"{PROMETHEUS} is absent: install Debian's prometheus package (scripts/test does)")
    tmp = tmp_path_factory.mktemp("prometheus-dcgm")
    driver = FakeDriver(tmp / "state.txt", "r550")
    driver.write(training_box(2, []))
    os.environ["NODE_NAME"] = NODE  # the exporter's environment is copied from this process's by driver.env()
    try:
        exporter = start_exporter(driver, "--listen", "127.0.0.1:0", "--dcgm-labels")
    finally:
        del os.environ["NODE_NAME"]
    dcgm = ThreadingHTTPServer(("127.0.0.1", 0), _DcgmExporter)
    threading.Thread(target=dcgm.serve_forever, daemon=True).start()
    dcgm_target = f"127.0.0.1:{dcgm.server_address[1]}"
    server = start_prometheus(tmp, {"gputop": [exporter.address], "dcgm": [dcgm_target]})
    try:

        def both(p: Prometheus) -> bool:
            return len(p.vector("gputop_gpu_up") or ()) == len(p.vector("DCGM_FI_DEV_GPU_UTIL") or ()) == 2

        wait_scraped(server, both, "both")
        yield server, exporter
    finally:
        server.stop()
        dcgm.shutdown()
        exporter.stop()


def test_dcgm_exporters_series_join_gputops_on_uuid(joined):
    server, _ = joined

    result = server.vector('DCGM_FI_DEV_GPU_UTIL * on(UUID) group_left(name) gputop_gpu_up{job="gputop"}')

    assert sorted((r["metric"]["UUID"], r["metric"]["name"], r["value"][1]) for r in result) == [
        (uuid, "NVIDIA H100 80GB HBM3", "87") for uuid in UUIDS
    ]


def test_gputops_hostname_label_is_the_node_name_dcgm_exporter_gives(joined):
    server, _ = joined

    result = server.vector("gputop_gpu_memory_used_bytes * on(UUID, Hostname) group_left() DCGM_FI_DEV_GPU_TEMP")

    assert {r["metric"]["Hostname"] for r in result} == {NODE}
    assert len(result) == 2


def test_the_two_exporters_join_on_the_gpus_pci_bus_id_too(joined):
    """The fake driver puts GPU i on bus 0x18 + i, where the dcgm-exporter text above has it."""
    server, _ = joined

    result = server.vector("DCGM_FI_DEV_GPU_TEMP * on(pci_bus_id, Hostname) group_left(uuid) gputop_gpu_up")

    assert sorted((r["metric"]["pci_bus_id"], r["metric"]["uuid"]) for r in result) == [
        (f"00000000:{0x18 + index:02X}:00.0", uuid) for index, uuid in enumerate(UUIDS)
    ]


def promql_examples() -> list[str]:
    """Every query of the ```promql blocks of docs/exporter.md: a line that starts at the margin starts one, an
    indented line or one that starts with a bracket or an operator goes on with it."""
    queries: list[str] = []
    for block in re.findall(r"```promql\n(.*?)```", DOCS.read_text(), re.S):
        for line in block.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            if line[0] in " )*/+-" and queries:
                queries[-1] += "\n" + line
            else:
                queries.append(line)
    return queries


def test_the_docs_have_a_promql_example_for_each_family_the_exporter_has():
    text = "\n".join(promql_examples())

    for family in ("gputop_gpu_", "gputop_mig_", "gputop_host_", "gputop_torch_", "gputop_training_"):
        assert family in text
    for name in ("gputop_process_pod_info", "gputop_advice_active", "gputop_gpu_health", "on(UUID)"):
        assert name in text


@pytest.mark.parametrize("expr", promql_examples())
def test_every_promql_example_in_the_docs_is_a_query_prometheus_takes(joined, expr):
    server, _ = joined

    answer = server.query(expr)

    assert answer["status"] == "success", answer.get("error")
