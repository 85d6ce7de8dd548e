"""The metrics HTTP endpoint: the ``--listen`` address and prometheus-client's threaded server."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

DEFAULT_LISTEN = "127.0.0.1:9400"
_EXAMPLE = "e.g. 127.0.0.1:9400, [::1]:9400, or 0.0.0.0:9400 for every interface"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets) as a host and port. Raises ValueError with a message for users.

    An empty host is refused rather than read as every interface: exposing the metrics beyond this machine
    must be asked for by name.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"--listen {text!r} is not HOST:PORT ({_EXAMPLE})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"--listen {text!r}: put an IPv6 address in brackets ({_EXAMPLE})")
    if not host:
        raise ValueError(f"--listen {text!r} names no host ({_EXAMPLE})")
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--listen {text!r}: {port_text!r} is not a port number from 0 to 65535")
    return host, int(port_text)


@dataclass
class MetricsServer:
    """A running endpoint; ``port`` is the one really bound (``--listen HOST:0`` picks a free one)."""

    host: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2.0)


def serve(registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Serve ``registry`` on a daemon thread, one thread per request. Raises OSError when it cannot bind."""
    server, thread = start_http_server(port, host, registry)
    return MetricsServer(host, server.server_address[1], server, thread)
