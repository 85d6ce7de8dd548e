"""Pods from the API server: the list of the pods on this node (``GET /api/v1/pods?fieldSelector=spec.nodeName=``),
asked with the node's service account, over TLS checked against the cluster's CA.

Each pod's status names its containers' ids (``containerd://<64 hex>``): with the pod UID, that is exactly what a
process's cgroup names, so a process is placed in its pod and container without guessing. The request is one per
refresh, whatever the number of processes, and needs ``list`` on ``pods`` (docs/kubernetes.md has the role)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from gputop.collect.pods.names import (
    MAX_CONTAINERS,
    MAX_PODS,
    ListedPod,
    PodListing,
    container_id_of,
    container_name_ok,
    namespace_ok,
    pod_name_ok,
    uid_of,
)
from gputop.collect.pods.source import PodSourceError
from gputop.frozen import immutable
from gputop.sanitize import printable

if TYPE_CHECKING:
    import http.client

MAX_ANSWER_BYTES = 32 * 1024 * 1024
"""The most of one pod list read: a pod with its managed fields takes 5 to 20 KB, so this holds well over a
node's ``maxPods`` of them; a longer answer is refused rather than parsed."""
MAX_TOKEN_BYTES = 16 * 1024
"""The most of the token file read: a service account's JWT takes about 1 KB."""
TIMEOUT_S = 5.0
"""How long one request may take, connecting and reading included."""
_STATUS_KEYS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


@immutable
class ApiServer:
    """Where the API server is and how to ask it: its base URL, the file of the service account's token (read for
    each request: a projected token is replaced every hour), the name of this node, and the CA that signs the
    server's certificate (None: the system's)."""

    url: str
    token_file: str
    node: str
    ca_file: str | None = None
    timeout_s: float = TIMEOUT_S

    name = "API server"

    def listing(self) -> PodListing:
        """This node's pods, or ``PodSourceError`` with the reason there are none to tell."""
        return parse_pod_list(self._get())

    def _get(self) -> bytes:
        # Imported at the first request, not with the module: every dashboard and --once imports the host
        # collector, which makes a resolver, and http.client with ssl cost 20-40 ms of start-up for a source that
        # most machines never ask.
        import http.client
        import ssl

        token = _token(self.token_file)
        parts = urlsplit(self.url)
        path = f"/api/v1/pods?fieldSelector={quote(f'spec.nodeName={self.node}', safe='')}"
        deadline = time.monotonic() + self.timeout_s
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=self.ca_file)
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout_s, context=context
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout_s)
        try:
            connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            response = connection.getresponse()
            if response.status != 200:
                raise PodSourceError(f"{self.name}: {_refusal(response.status, response.reason)}")
            return _read_until(response, deadline, self.timeout_s)
        except PodSourceError:
            raise
        except TimeoutError:
            raise PodSourceError(f"{self.name}: no answer in {self.timeout_s:g} s") from None
        except ssl.SSLError as exc:
            raise PodSourceError(f"{self.name}: TLS: {printable(exc.reason or str(exc))}") from None
        except (OSError, http.client.HTTPException) as exc:
            words = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise PodSourceError(f"{self.name}: {printable(words)}") from None
        finally:
            connection.close()


def _token(path: str) -> str:
    try:
        with open(path, "rb") as f:
            token = f.read(MAX_TOKEN_BYTES).decode("ascii", errors="replace").strip()
    except OSError as exc:
        raise PodSourceError(f"API server: the token {path}: {exc.strerror or type(exc).__name__}") from None
    if not token or not token.isprintable():
        raise PodSourceError(f"API server: the token {path} is not a token")
    return token


def _refusal(status: int, reason: str) -> str:
    words = f"HTTP {status} {printable(reason[:64])}".rstrip()
    if status in (401, 403):
        return f"{words}: the service account may not list pods (docs/kubernetes.md has the role)"
    return words


def _read_until(response: http.client.HTTPResponse, deadline: float, timeout_s: float) -> bytes:
    """The body, read in pieces, refused past ``MAX_ANSWER_BYTES`` or the deadline: the socket's timeout bounds
    one read only, and a server that drips a byte at a time would make every read quick."""
    body = bytearray()
    while piece := response.read(64 * 1024):
        body += piece
        if len(body) > MAX_ANSWER_BYTES:
            raise PodSourceError(f"API server: an answer over {MAX_ANSWER_BYTES >> 20} MiB")
        if time.monotonic() > deadline:
            raise PodSourceError(f"API server: no whole answer in {timeout_s:g} s")
    return bytes(body)


def parse_pod_list(body: bytes) -> PodListing:
    """The pods of a ``PodList``'s JSON, each held to Kubernetes' rules (``names``); at most ``MAX_PODS``."""
    try:
        plain = json.loads(body)
    except (ValueError, RecursionError):
        raise PodSourceError("API server: the answer is not JSON") from None
    items = plain.get("items") if type(plain) is dict else None
    if type(items) is not list:
        raise PodSourceError("API server: the answer is not a pod list")
    pods: dict[str, ListedPod] = {}
    refused: set[str] = set()
    for item in items[:MAX_PODS]:
        metadata = item.get("metadata") if type(item) is dict else None
        if type(metadata) is not dict:
            continue
        uid = uid_of(metadata.get("uid"))
        if uid is None:
            continue
        namespace, name = metadata.get("namespace"), metadata.get("name")
        if not (namespace_ok(namespace) and pod_name_ok(name)):
            refused.add(uid)
            continue
        assert isinstance(namespace, str) and isinstance(name, str)  # checked just above
        pods[uid] = ListedPod(namespace, name, *_containers(item))
    return PodListing(pods, frozenset(refused))


def _containers(item: dict[str, object]) -> tuple[dict[str, str], str | None]:
    """A pod's container names by container id (from its status), and its one container's name where its spec
    has just one."""
    by_id: dict[str, str] = {}
    status = item.get("status")
    for key in _STATUS_KEYS:
        statuses = status.get(key) if type(status) is dict else None
        for entry in statuses[:MAX_CONTAINERS] if type(statuses) is list else ():
            if type(entry) is not dict or not container_name_ok(entry.get("name")):
                continue
            container_id = container_id_of(entry.get("containerID"))
            if container_id is not None:
                by_id[container_id] = str(entry["name"])
    spec = item.get("spec")
    declared = spec.get("containers") if type(spec) is dict else None
    only = None
    if type(declared) is list and len(declared) == 1 and type(declared[0]) is dict:
        name = declared[0].get("name")
        only = name if isinstance(name, str) and container_name_ok(name) else None
    return by_id, only
