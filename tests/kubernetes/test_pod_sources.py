"""The pod sources against a real HTTPS server speaking the API server's protocol with a recorded answer, and the
kubelet's log directory layout: what they tell, and the reason when they cannot."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import unquote

import pytest

from gputop.collect.pods import apiserver
from gputop.collect.pods.apiserver import ApiServer
from gputop.collect.pods.logdirs import LogDirectories
from gputop.collect.pods.names import MAX_PODS, ListedPod
from gputop.collect.pods.source import PodSourceError
from tests.kubernetes.conftest import CONTAINER_ID, POD_UID, RECORDED, hostile_pod_list, log_tree


def test_the_api_servers_pod_list_names_the_pod_and_its_container_by_id(api_server):
    _, source = api_server
    listing = source().listing()
    assert listing.pods[POD_UID] == ListedPod("default", "queue-l4dv8", {CONTAINER_ID: "queue"}, "queue")


def test_the_request_asks_for_this_nodes_pods_only_with_the_service_accounts_token(api_server):
    answer, source = api_server
    source().listing()
    [(path, authorization)] = answer.requests
    assert unquote(path) == "/api/v1/pods?fieldSelector=spec.nodeName=minikube"
    assert authorization == "Bearer eyJhbGciOiJSUzI1NiJ9.recorded.token"


def test_a_refused_list_is_a_reason_that_names_the_role(api_server):
    answer, source = api_server
    answer.status, answer.body = 403, b'{"kind":"Status","reason":"Forbidden"}'
    with pytest.raises(PodSourceError, match=r"HTTP 403 .*may not list pods"):
        source().listing()


def test_a_port_nobody_listens_on_is_a_reason(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("t")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(PodSourceError, match="API server: Connection refused"):
        ApiServer(f"https://127.0.0.1:{port}", str(token), "n").listing()


def test_a_slow_api_server_is_given_up_on_with_a_reason(api_server):
    answer, source = api_server
    answer.delay_s = 3.0
    with pytest.raises(PodSourceError, match=r"no answer in 0\.3 s"):
        source(timeout_s=0.3).listing()


def test_a_server_the_clusters_ca_did_not_sign_is_not_asked(api_server):
    _, source = api_server
    with pytest.raises(PodSourceError, match="TLS"):
        source(ca=None).listing()


@pytest.mark.parametrize(
    ("namespace", "name", "container"),
    [
        ("default", "queue\x1b]0;owned\x07", "queue"),
        ("default\x1b[2J", "queue", "queue"),
        ("Default", "queue", "queue"),
        ("default", "q" * 254, "queue"),
        ("default", "queue", "queue\u202e"),
    ],
)
def test_names_kubernetes_would_refuse_are_not_told(api_server, namespace, name, container):
    answer, source = api_server
    answer.body = hostile_pod_list(namespace, name, container)
    listing = source().listing()
    pod = listing.pods.get(POD_UID)
    if pod is None:
        assert POD_UID in listing.refused
    else:  # only the container's name was bad: the pod is told, the container not
        assert pod.containers == {} and "\u202e" not in repr(pod)


def test_a_huge_pod_list_is_read_for_at_most_max_pods(api_server):
    answer, source = api_server
    item = json.loads(RECORDED.read_bytes())["items"][0]
    items = []
    for n in range(MAX_PODS + 500):
        uid = f"{n:08x}-0000-4000-8000-000000000000"
        items.append({**item, "metadata": {**item["metadata"], "uid": uid, "name": f"p{n}"}})
    answer.body = json.dumps({"kind": "PodList", "items": items}).encode()
    assert len(source().listing().pods) == MAX_PODS


def test_an_answer_over_the_size_limit_is_refused_unparsed(api_server, monkeypatch):
    _, source = api_server
    monkeypatch.setattr(apiserver, "MAX_ANSWER_BYTES", 1024)
    with pytest.raises(PodSourceError, match="over 0 MiB"):
        source().listing()


def test_an_answer_that_is_not_a_pod_list_is_a_reason(api_server):
    answer, source = api_server
    answer.body = b"<html>login</html>"
    with pytest.raises(PodSourceError, match="not JSON"):
        source().listing()


def test_the_log_directories_name_the_pod_and_the_container_of_an_id(tmp_path: Path):
    pods, containers = log_tree(
        tmp_path,
        {f"ml_train-0_{POD_UID}": ["trainer", "sidecar"]},
        (f"train-0_ml_trainer-{CONTAINER_ID}.log", f"train-0_ml_sidecar-{'e' * 64}.log"),
    )
    listing = LogDirectories(str(pods), str(containers)).listing()
    assert listing.pods[POD_UID] == ListedPod("ml", "train-0", {CONTAINER_ID: "trainer", "e" * 64: "sidecar"})


def test_log_directory_names_kubernetes_would_refuse_are_not_told(tmp_path: Path):
    pods, containers = log_tree(tmp_path, {f"ml_Evil\x1b[2J_{POD_UID}": ["main"]})
    listing = LogDirectories(str(pods), str(containers)).listing()
    assert listing.pods == {} and listing.refused == {POD_UID}


def test_missing_log_directories_are_a_reason(tmp_path: Path):
    with pytest.raises(PodSourceError, match="No such file"):
        LogDirectories(str(tmp_path / "pods"), str(tmp_path / "containers")).listing()
