"""A process's pod by name in what gputop writes: recordings (old ones still read), --json, the exporter's info
series, the dashboard's table cells."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gputop.codec import V1_NOT_RECORDED, snapshot_from_json, snapshot_json
from gputop.document import snapshot_to_dict
from gputop.model import Container, Pod
from gputop.ui.process_rows import ViewOptions, build_rows
from gputop.ui.text.process_cells import cell_text
from tests.export.scrape import value
from tests.export.test_metrics import PROCESS, exposition, scrape, snapshot

UID = "d8aa9a47-ad0f-4bbe-bc12-ab31605d3211"
CONTAINER = Container("kubernetes", "/kubepods.slice/x", id="d" * 64, pod_uid=UID)
POD = Pod("ml", "train-llama-5f6d8c9b7-x2k4q", "trainer", "apiserver")


def in_pod(pod: Pod | None = POD, reason: str | None = None):
    assert PROCESS.host is not None
    host = replace(PROCESS.host, container=CONTAINER, pod=pod, unavailable={"pod": reason} if reason else {})
    return snapshot(processes=(replace(PROCESS, host=host),), host_processes=(host,))


def test_a_recording_keeps_the_pod():
    snap = in_pod()
    assert snapshot_from_json(snapshot_json(snap)).processes[0].host.pod == POD


def test_a_recording_made_before_pods_were_named_reads_with_the_reason_not_recorded():
    plain = json.loads(snapshot_json(in_pod()))
    for host in plain["host_processes"]:
        del host["pod"]
    host = snapshot_from_json(json.dumps(plain).encode()).host_processes[0]
    assert host.pod is None and host.unavailable["pod"] == V1_NOT_RECORDED


@pytest.mark.parametrize("name", ["train\x1b]0;x\x07", "Train", "t" * 254])
def test_a_recorded_pod_name_kubernetes_would_refuse_is_refused(name):
    plain = json.loads(snapshot_json(in_pod()))
    plain["host_processes"][0]["pod"]["name"] = name
    with pytest.raises(ValueError, match=r"Pod\.name"):
        snapshot_from_json(json.dumps(plain).encode())


def test_json_has_the_pod_of_each_process_and_the_reason_where_it_is_not_named():
    [row] = snapshot_to_dict(in_pod())["processes"]
    assert row["pod"] == {"namespace": "ml", "name": POD.name, "container": "trainer", "source": "apiserver"}
    [row] = snapshot_to_dict(in_pod(None, "no pod source: no service account"))["processes"]
    assert row["pod"] is None and row["unavailable"]["pod"] == "no pod source: no service account"


def test_the_exporter_names_pods_in_one_info_series_per_process():
    samples = scrape(in_pod(), per_process=True)
    labels = {"pid": "4242", "namespace": "ml", "pod": POD.name, "container": "trainer", "pod_uid": UID}
    assert value(samples, "gputop_process_pod_info", **labels) == 1


def test_the_exporter_puts_no_pod_name_on_other_series():
    text = exposition(in_pod(), per_process=True)
    assert [
        line for line in text.splitlines() if POD.name in line and not line.startswith("gputop_process_pod_info")
    ] == []
    assert "gputop_process_pod_info" not in exposition(in_pod(), per_process=False)


def test_the_table_shows_namespace_pod_and_container_and_the_pod_alone_where_narrow():
    [row] = [r for r in build_rows(in_pod(), ViewOptions()) if r.pid == PROCESS.pid]
    assert cell_text(row, "container") == f"ml/{POD.name}/trainer"
    assert cell_text(row, "pod") == POD.name


def test_the_table_says_na_where_the_pod_is_not_named():
    [row] = [r for r in build_rows(in_pod(None, "resolving"), ViewOptions()) if r.pid == PROCESS.pid]
    assert cell_text(row, "pod") == "N/A"
