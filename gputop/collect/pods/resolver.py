"""The pod and container a process runs in, by name, from its cgroup's pod UID and container id: the sources'
pod lists, read on a thread of their own every ``POD_REFRESH_S`` and looked up by the sampler without waiting.

A pod's UID names one pod for its whole life, and a container id one container, so a list once read stays true
for the pods in it: a source that stops answering leaves the last list in use, and a UID no list has yet (a pod
started since) asks for a new read, no sooner than ``UNKNOWN_POD_RETRY_S`` after the last."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

from gputop.collect.pods.apiserver import ApiServer
from gputop.collect.pods.logdirs import LogDirectories
from gputop.collect.pods.names import PodListing
from gputop.collect.pods.source import PodSource, PodSourceError
from gputop.model import POD_ORIGIN_WORDS, Container, Pod, PodOrigin

POD_REFRESH_S = 30.0
"""How often the pod list is read again: pods come and go in minutes, and one list is one request to the API
server per node (a 1,000-node cluster asks 33 times a second at this pace)."""
UNKNOWN_POD_RETRY_S = 2.0
"""How soon a pod UID not in the list may ask for another read: a pod that just started is told within a tick
or two, and a UID that no source will ever list costs one request per this many seconds at most."""
SETTLE_S = 10.0
"""The longest a snapshot taken once (``--once``, ``--json``) waits for the first pod list: the API server's
answer (5 s at most), then the log directories where it failed."""
RESOLVING = "resolving: the pod list is being read"
NAME_REFUSED = "the pod's names are not Kubernetes names: not shown"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_SOURCE_NAMES: dict[str, PodOrigin] = {ApiServer.name: "apiserver", LogDirectories.name: "logs"}


class PodResolver:
    """Pods by the UID a cgroup names, from the first of ``sources`` that answers; ``absent`` is the reason given
    where there are none. ``lookup`` never waits: the thread that reads starts on the first lookup of a pod."""

    def __init__(
        self,
        sources: Sequence[PodSource],
        absent: str = "no pod source",
        refresh_s: float = POD_REFRESH_S,
        retry_s: float = UNKNOWN_POD_RETRY_S,
    ) -> None:
        self._sources = tuple(sources)
        self._absent = absent
        self._refresh_s = refresh_s
        self._retry_s = retry_s
        self._state: tuple[PodListing | None, str | None, PodOrigin] = (None, RESOLVING, "apiserver")
        """The last list read, the reason the last read failed (None: it did not), the source it came from: one
        tuple, replaced whole, so the sampler reads a consistent one without a lock."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._first_read = threading.Event()

    def lookup(self, container: Container | None) -> tuple[Pod | None, str | None]:
        """The pod of a process in ``container`` and the reason when it cannot be told; ``(None, None)`` for a
        process in no pod."""
        if container is None or container.runtime != "kubernetes" or container.pod_uid is None:
            return None, None
        if not self._sources:
            return None, self._absent
        self._start()
        listing, failure, source = self._state
        if listing is None:
            return None, failure
        uid = container.pod_uid.lower()
        pod = listing.pods.get(uid)
        if pod is None:
            if uid in listing.refused:
                return None, NAME_REFUSED
            self._wake.set()
            return None, failure or f"not in the pod list of the {POD_ORIGIN_WORDS[source]}"
        name = pod.containers.get(container.id) if container.id is not None else None
        return Pod(pod.namespace, pod.name, name or pod.only_container, source), None

    def wait(self, timeout_s: float = SETTLE_S) -> bool:
        """Wait until the first read of the pod list has ended (a list, or every source's reason), ``timeout_s`` at
        most; whether it has. For a snapshot taken once, which has no later tick to show the names; no wait where
        no process was looked up in a pod (the reading thread starts on the first such lookup)."""
        if self._thread is None:
            return True
        return self._first_read.wait(timeout_s)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gputop-pods", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            self._stop.wait(self._retry_s)  # at most one read per retry_s, however often a lookup wakes it

    def _read(self) -> None:
        try:
            self._read_sources()
        finally:
            self._first_read.set()

    def _read_sources(self) -> None:
        reasons = []
        for source in self._sources:
            try:
                listing = source.listing()
            except PodSourceError as exc:
                reasons.append(exc.reason)
                continue
            except Exception as exc:  # a source's own bug is a reason too: this thread must go on
                reasons.append(f"{source.name}: {type(exc).__name__}")
                continue
            self._state = (listing, None, _SOURCE_NAMES.get(source.name, "apiserver"))
            return
        self._state = (self._state[0], "; ".join(reasons), self._state[2])


def from_environment(
    env: Mapping[str, str] = os.environ,
    service_account: str = SERVICE_ACCOUNT,
    logs: LogDirectories | None = None,
) -> PodResolver:
    """The sources this node offers: the API server where a service account is mounted and ``NODE_NAME`` says
    which node this is (the DaemonSet sets it from ``spec.nodeName``), then the kubelet's log directories where
    they can be seen; the reason when neither can be asked."""
    logs = logs or LogDirectories()
    sources: list[PodSource] = []
    missing = []
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    token = os.path.join(service_account, "token")
    if not host or not os.path.exists(token):
        missing.append("no service account")
    elif not env.get("NODE_NAME"):
        missing.append("NODE_NAME is not set (docs/kubernetes.md)")
    else:
        bracketed = f"[{host}]" if ":" in host else host
        ca = os.path.join(service_account, "ca.crt")
        sources.append(ApiServer(f"https://{bracketed}:{port}", token, env["NODE_NAME"], ca))
    if os.path.isdir(logs.pods_dir):
        sources.append(logs)
    else:
        missing.append(f"no {logs.pods_dir}")
    return PodResolver(sources, "no pod source: " + ", ".join(missing))
