"""The resolver: a process's pod by name from its cgroup, off the sampling thread, never waiting on a source, and a
reason wherever it cannot tell; and the host collector's processes carrying it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gputop.collect import host as host_module
from gputop.collect.container import container_of
from gputop.collect.host import HostCollector
from gputop.collect.pods.names import PodListing
from gputop.collect.pods.resolver import RESOLVING, PodResolver, from_environment
from gputop.collect.pods.source import PodSourceError
from gputop.model import Container, Pod
from tests.kubernetes.conftest import CGROUP, log_tree

RECORDED_POD = Pod("default", "queue-l4dv8", "queue", "apiserver")


def until(condition, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("not within the deadline")


def recorded_container() -> Container:
    container, _ = container_of(CGROUP)
    assert container is not None
    return container


def test_a_process_whose_cgroup_names_a_listed_pod_is_told_its_names(api_server):
    _, source = api_server
    resolver = PodResolver([source()])
    assert until(lambda: resolver.lookup(recorded_container())[0]) == RECORDED_POD


def test_a_process_in_no_pod_has_no_pod_and_no_reason():
    resolver = PodResolver([])
    assert resolver.lookup(Container("docker", "/docker/x", id="a" * 64)) == (None, None)
    assert resolver.lookup(None) == (None, None)


def test_the_lookup_never_waits_for_a_slow_source():
    release = threading.Event()

    class Stuck:
        name = "API server"

        def listing(self) -> PodListing:
            release.wait(30)
            raise PodSourceError("API server: no answer in 5 s")

    resolver = PodResolver([Stuck()])
    started = time.monotonic()
    assert resolver.lookup(recorded_container()) == (None, RESOLVING)
    assert time.monotonic() - started < 5  # the source holds its thread for 30 s
    release.set()
    until(lambda: resolver.lookup(recorded_container())[1] != RESOLVING)
    assert resolver.lookup(recorded_container()) == (None, "API server: no answer in 5 s")


def test_a_refused_api_server_falls_back_to_the_log_directories(api_server, tmp_path: Path):
    from gputop.collect.pods.logdirs import LogDirectories
    from tests.kubernetes.conftest import CONTAINER_ID, POD_UID

    answer, source = api_server
    answer.status = 403
    pods, containers = log_tree(
        tmp_path, {f"default_queue-l4dv8_{POD_UID}": ["queue"]}, (f"queue-l4dv8_default_queue-{CONTAINER_ID}.log",)
    )
    resolver = PodResolver([source(), LogDirectories(str(pods), str(containers))])
    found = until(lambda: resolver.lookup(recorded_container())[0])
    assert found == Pod("default", "queue-l4dv8", "queue", "logs")


def test_a_source_that_stops_answering_leaves_the_pods_it_listed_named(api_server):
    answer, source = api_server
    resolver = PodResolver([source()], refresh_s=0.05, retry_s=0.01)
    until(lambda: resolver.lookup(recorded_container())[0])
    answer.status = 503
    until(lambda: len(answer.requests) >= 3)
    assert resolver.lookup(recorded_container()) == (RECORDED_POD, None)


def test_a_pod_not_yet_listed_asks_for_the_list_again_soon(api_server):
    answer, source = api_server
    answer.body = b'{"kind":"PodList","items":[]}'
    resolver = PodResolver([source()], refresh_s=3600, retry_s=0.05)
    reason = until(
        lambda: resolver.lookup(recorded_container())[1] != RESOLVING and resolver.lookup(recorded_container())
    )
    assert reason == (None, "not in the pod list of the API server")
    from tests.kubernetes.conftest import RECORDED

    answer.body = RECORDED.read_bytes()
    assert until(lambda: resolver.lookup(recorded_container())[0]) == RECORDED_POD


def test_no_source_on_the_node_is_a_reason_not_a_thread(tmp_path: Path):
    from gputop.collect.pods.logdirs import LogDirectories

    resolver = from_environment({}, str(tmp_path), LogDirectories(str(tmp_path / "none")))
    pod, reason = resolver.lookup(recorded_container())
    assert pod is None and reason is not None and reason.startswith("no pod source: no service account")


def test_a_service_account_without_node_name_says_so(tmp_path: Path):
    (tmp_path / "token").write_text("t")
    resolver = from_environment({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(tmp_path))
    assert "NODE_NAME is not set" in (resolver.lookup(recorded_container())[1] or "")


def test_the_host_collector_gives_a_real_process_in_a_pod_its_names(api_server, spawn, monkeypatch):
    _, source = api_server
    process = spawn()
    # No real cgroup can be made here: the process's cgroup text comes through the collector's one reader.
    monkeypatch.setattr(
        host_module,
        "read_container",
        lambda pid, ns=False: container_of(CGROUP) if pid == process.pid else (None, None),
    )
    collector = HostCollector(pods=PodResolver([source()]))
    record = until(lambda: collector.processes([process.pid])[process.pid].pod and collector.processes([process.pid]))
    assert record[process.pid].pod == RECORDED_POD
    assert "pod" not in record[process.pid].unavailable


def test_the_host_collector_gives_the_reason_while_the_pod_is_not_named(spawn, monkeypatch, tmp_path: Path):
    from gputop.collect.pods.logdirs import LogDirectories

    process = spawn()
    monkeypatch.setattr(host_module, "read_container", lambda pid, ns=False: container_of(CGROUP))
    pods, containers = log_tree(tmp_path, {})
    collector = HostCollector(pods=PodResolver([LogDirectories(str(pods), str(containers))]))
    record = until(
        lambda: (
            "pod" in (r := collector.processes([process.pid])[process.pid]).unavailable
            and r.unavailable["pod"] != RESOLVING
            and r
        )
    )
    assert record.pod is None
    assert record.unavailable["pod"] == "not in the pod list of the kubelet's log directories"


class Gated:
    """A source that answers as ``source`` does once ``gate`` is opened, and notes that it was asked."""

    name = "API server"

    def __init__(self, source, gate: threading.Event) -> None:  # type: ignore[no-untyped-def]
        self.source, self.gate, self.asked = source, gate, threading.Event()

    def listing(self) -> PodListing:
        self.asked.set()
        self.gate.wait(30)
        return self.source.listing()


def test_a_snapshot_taken_once_waits_for_the_first_pod_list(api_server, spawn, monkeypatch):
    _, source = api_server
    process = spawn()
    monkeypatch.setattr(host_module, "read_container", lambda pid, ns=False: container_of(CGROUP))
    gate = threading.Event()
    collector = HostCollector(pods=PodResolver([Gated(source(), gate)]))
    first = collector.processes([process.pid])[process.pid]
    assert (first.pod, first.unavailable["pod"]) == (None, RESOLVING)

    gate.set()
    collector.settle()

    settled = collector.processes([process.pid])[process.pid]
    assert settled.pod == RECORDED_POD
    assert "pod" not in settled.unavailable


def test_with_no_process_in_a_pod_settling_asks_no_source(spawn, monkeypatch):
    process = spawn()
    monkeypatch.setattr(host_module, "read_container", lambda pid, ns=False: (None, None))
    source = Gated(None, threading.Event())
    resolver = PodResolver([source])
    collector = HostCollector(pods=resolver)
    collector.processes([process.pid])

    collector.settle()

    assert resolver.wait(0) is True
    assert not source.asked.is_set()


def test_the_wait_for_the_pod_list_is_bounded():
    gate = threading.Event()
    source = Gated(None, gate)
    resolver = PodResolver([source])
    try:
        assert resolver.lookup(recorded_container()) == (None, RESOLVING)
        assert source.asked.wait(30)

        assert resolver.wait(0.05) is False
        assert resolver.lookup(recorded_container()) == (None, RESOLVING)
    finally:
        resolver.close()
        gate.set()
