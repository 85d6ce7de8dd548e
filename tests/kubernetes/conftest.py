"""A real HTTPS server on loopback answering the API server's pod list, with the recorded answer or a hostile one,
and the kubelet's log directories laid out in a temporary directory."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gputop.collect.pods.apiserver import ApiServer

RECORDED = Path(__file__).parent.parent / "data" / "kubernetes" / "pod-list-minikube.json"
POD_UID = "d8aa9a47-ad0f-4bbe-bc12-ab31605d3211"
CONTAINER_ID = "d8e1e33309272b4a4267e15f995ff7b6612532240cb61dc03a118659620226f2"
CGROUP = (
    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
    f"{POD_UID.replace('-', '_')}.slice/docker-{CONTAINER_ID}.scope\n"
)
"""The recorded pod's container's cgroup, as ``/proc/PID/cgroup`` shows it (cgroup v2, systemd driver)."""


@dataclass
class Answer:
    """What the server answers next: a status, a body, and how long it waits before answering."""

    status: int = 200
    body: bytes = field(default_factory=RECORDED.read_bytes)
    delay_s: float = 0.0
    requests: list[tuple[str, str]] = field(default_factory=list)
    """Each request's path and Authorization header."""


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (the certificate is its own CA)."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "ca.crt", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def api_server(certificate: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Answer, Callable[..., ApiServer]]]:
    """A real HTTPS server on loopback answering every GET with ``Answer``, and a maker of the source that asks it
    with a token file and the server's CA."""
    answer = Answer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer.requests.append((self.path, self.headers.get("Authorization", "")))
            time.sleep(answer.delay_s)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.recorded.token\n")

    def source(timeout_s: float = 5.0, ca: Path | None = certificate[0]) -> ApiServer:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        return ApiServer(url, str(token), "minikube", None if ca is None else str(ca), timeout_s)

    yield answer, source
    server.shutdown()
    server.server_close()


def hostile_pod_list(namespace: str, name: str, container: str = "main") -> bytes:
    """The recorded pod with other names, as a hostile or broken API server might answer."""
    plain = json.loads(RECORDED.read_bytes())
    item = plain["items"][0]
    item["metadata"].update(namespace=namespace, name=name)
    item["status"]["containerStatuses"][0]["name"] = container
    return json.dumps(plain).encode()


def log_tree(root: Path, entries: dict[str, list[str]], links: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """``/var/log/pods`` with a directory per entry (its containers' directories inside), and
    ``/var/log/containers`` with these link names, under ``root``."""
    pods, containers = root / "pods", root / "containers"
    containers.mkdir(parents=True)
    pods.mkdir()
    for entry, names in entries.items():
        for name in names:
            (pods / entry / name).mkdir(parents=True)
    for link in links:
        (containers / link).symlink_to("/dev/null")
    return pods, containers
