"""The metrics HTTP endpoint: the ``--listen`` address, and a small HTTP/1.1 server on the exporter's event loop.

Anyone who can reach the port is a client, so what one client can hold is bounded. Every connection is served by
the one event loop, so idle connections cost a file descriptor each, never a thread. A connection has
``REQUEST_TIMEOUT_S`` to deliver its whole request head, however it trickles it (slowloris), and
``RESPONSE_TIMEOUT_S`` to take the answer; then it is closed. At most ``MAX_CONNECTIONS`` are open at once: a
new one beyond that closes the oldest connection that has not sent its request yet (a scraper sends it at once,
so what waits is idle or trickling and cannot lock scrapers out), or, when every open one is being answered, is
told 503 and closed. The listen backlog holds ``BACKLOG`` connections waiting to be accepted, so a burst of
scrapers is queued rather than dropped and retried a second later.

Closing a connection is expected (a client that holds idle connections open, or a port scanner), so it is quiet:
one line when the first is closed for room, then at most one line a minute with how many more were.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import io
import logging
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from prometheus_client.exposition import gzip_accepted

from gputop.export import DEFAULT_LISTEN, DEFAULT_PORT

log = logging.getLogger(__name__)

_EXAMPLE = f"e.g. {DEFAULT_LISTEN}, [::1]:{DEFAULT_PORT}, or 0.0.0.0:{DEFAULT_PORT} for every interface"

BACKLOG = 128
MAX_CONNECTIONS = 128
REQUEST_TIMEOUT_S = 5.0
RESPONSE_TIMEOUT_S = 10.0
# A scraper's request head is a few hundred bytes; anything near this is not a scraper.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
METRICS_PATHS = ("/metrics", "/")
READY_PATH = "/-/ready"
"""Prometheus's own readiness path: 503 until the first snapshot, then 200 (a Kubernetes readiness probe)."""
EVICTION_NOTE_EVERY_S = 60.0
"""The most often a line says that connections were closed to make room: a client can open thousands a second."""

Render = Callable[[str], tuple[bytes, str]]
"""The metrics for a request's ``Accept`` header: the body and its content type."""
Ready = Callable[[], bool]
"""Whether there is a snapshot to serve yet."""


def _always_ready() -> bool:
    return True


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
    if len(host) > 253 or not host.isprintable():  # the longest DNS name; the resolver raises UnicodeError past it
        raise ValueError(f"--listen {text[:80]!r}: not a host name or address ({_EXAMPLE})")
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--listen {text!r}: {port_text!r} is not a port number from 0 to 65535")
    return host, int(port_text)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host`` (a name or an address) and ``port``, with a backlog of ``BACKLOG``.

    Raises OSError: the address is in use, or the host has no address.
    """
    try:
        [first, *_] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except UnicodeError:  # a label over 63 characters, which the IDNA codec refuses before any lookup
        raise OSError(f"{host!r} is not a host name") from None
    family, kind, proto, _, address = first
    sock = socket.socket(family, kind, proto)
    try:
        # A restarted exporter binds again at once, even while its old connections linger in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


class _EvictionNotes:
    """Says that connections were closed to make room: the first at once, then how many more at most once every
    ``EVICTION_NOTE_EVERY_S``, and what is left untold when the server closes."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._untold = 0
        self._timer: asyncio.TimerHandle | None = None

    def evicted(self) -> None:
        if self._timer is not None:
            self._untold += 1
            return
        self._say(
            f"closed a connection that had sent no request, to keep at most {MAX_CONNECTIONS} open; more such "
            f"closings are counted and told at most once every {EVICTION_NOTE_EVERY_S:g} s"
        )
        self._timer = asyncio.get_running_loop().call_later(EVICTION_NOTE_EVERY_S, self._tell)

    def _tell(self) -> None:
        self._timer = None
        if self._flush():
            self._timer = asyncio.get_running_loop().call_later(EVICTION_NOTE_EVERY_S, self._tell)

    def _flush(self) -> bool:
        """Say how many were closed since the last line, if any; whether there were."""
        count, self._untold = self._untold, 0
        if count:
            self._say(
                f"closed {count} more connection{'s' if count != 1 else ''} that had sent no request, to keep at "
                f"most {MAX_CONNECTIONS} open"
            )
        return bool(count)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._flush()


class MetricsServer:
    """The metrics ``render`` makes, served over HTTP on the running event loop; ``port`` is the one really bound
    (``HOST:0`` picks a free one). ``say`` gets the note that connections were closed to make room; ``ready`` says
    what ``READY_PATH`` answers."""

    def __init__(
        self, render: Render, host: str, sock: socket.socket, say: Callable[[str], None], ready: Ready = _always_ready
    ) -> None:
        self.host = host
        self.port: int = sock.getsockname()[1]
        self._render = render
        self._ready = ready
        self._sock = sock
        self._server: asyncio.Server | None = None
        # Every open connection's task and transport; ended by closing the transport, never by cancelling the task
        # (asyncio's own callback for a cancelled connection task logs a traceback before Python 3.12).
        self._connections: dict[asyncio.Task[None], asyncio.WriteTransport] = {}
        # Those still waiting for their request head, oldest first (a dict keeps the order it was filled in).
        self._waiting: dict[asyncio.Task[None], None] = {}
        self._notes = _EvictionNotes(say)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve_connection, sock=self._sock, backlog=BACKLOG, limit=MAX_REQUEST_HEAD_BYTES
        )

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        self._notes.close()
        tasks = list(self._connections)
        for transport in self._connections.values():
            transport.abort()  # each task then ends on its own: its read or write fails
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        self._sock.close()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer.transport
        self._make_room()
        # The answer is handed to the kernel whole before the connection closes, so closing never waits on a
        # client that does not read.
        writer.transport.set_write_buffer_limits(high=0)
        answered = False
        try:
            if len(self._connections) > MAX_CONNECTIONS:
                answer: bytes | None = _response(503, "Service Unavailable", b"too many connections\n")
            else:
                self._waiting[task] = None
                try:
                    answer = await self._answer(reader)
                finally:
                    self._waiting.pop(task, None)
            if answer is not None:
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), RESPONSE_TIMEOUT_S)
                answered = True
        except (asyncio.TimeoutError, ConnectionError):
            pass  # a client too slow to take its answer, or gone: nothing to tell it
        finally:
            self._connections.pop(task, None)
            if answered:
                writer.close()
            else:
                writer.transport.abort()

    def _make_room(self) -> None:
        """Above ``MAX_CONNECTIONS``, close the oldest connection still waiting for its request head, if any."""
        if len(self._connections) <= MAX_CONNECTIONS or not self._waiting:
            return
        oldest = next(iter(self._waiting))
        del self._waiting[oldest]
        # Its read ends with the connection (end of file), and its task returns as for a client that went away.
        self._connections.pop(oldest).abort()
        self._notes.evicted()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes | None:
        """The whole response to the request on ``reader``; None for a client that sent no request in time."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return None
        except asyncio.LimitOverrunError:
            return _response(431, "Request Header Fields Too Large", b"request head too large\n")
        return self._respond(head)

    def _respond(self, head: bytes) -> bytes:
        request_line, _, header_block = head.partition(b"\r\n")
        parts = request_line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _response(400, "Bad Request", b"not an HTTP/1 request\n")
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            return _response(405, "Method Not Allowed", b"only GET\n", [("Allow", "GET, HEAD")])
        try:
            path = urlsplit(target).path
        except ValueError:  # a malformed URL, such as an unclosed IPv6 bracket
            return _response(400, "Bad Request", b"not a URL\n")
        if path == READY_PATH:
            if self._ready():
                return _response(200, "OK", b"ready\n", send_body=method == "GET")
            return _response(503, "Service Unavailable", b"no snapshot yet\n", send_body=method == "GET")
        if path not in METRICS_PATHS:
            return _response(404, "Not Found", b"the metrics are at /metrics\n")
        try:
            headers = http.client.parse_headers(io.BytesIO(header_block))
        except http.client.HTTPException:
            return _response(431, "Request Header Fields Too Large", b"too many header fields\n")
        try:
            body, content_type = self._render(headers.get("Accept", ""))
        except Exception:  # a fault in the metrics must cost this scrape only, not the endpoint
            log.exception("scrape failed")
            return _response(500, "Internal Server Error", b"the metrics could not be made\n")
        fields = [("Content-Type", content_type)]
        if gzip_accepted(headers.get("Accept-Encoding", "")):
            # Metrics text is so repetitive that level 1 packs it nearly as small as level 9 (3.3 KB against
            # 3.0 KB for eight GPUs) in a sixth of the time, and compressing is most of a scrape's remaining cost.
            body = gzip.compress(body, compresslevel=1)
            fields.append(("Content-Encoding", "gzip"))
        return _response(200, "OK", body, fields, send_body=method == "GET")


def _response(
    status: int, reason: str, body: bytes, fields: list[tuple[str, str]] | None = None, send_body: bool = True
) -> bytes:
    """An HTTP/1.1 response that closes the connection: one request per connection keeps the server simple and
    frees the connection as soon as the scrape is answered."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    if fields is None:
        fields = [("Content-Type", "text/plain; charset=utf-8")]
    lines += [f"{name}: {value}" for name, value in fields]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (body if send_body else b"")


async def serve(
    render: Render, host: str, port: int, say: Callable[[str], None], ready: Ready = _always_ready
) -> MetricsServer:
    """Serve the metrics ``render`` makes on ``host``:``port`` from the running event loop; ``say`` gets the rare
    note about closed connections, ``ready`` whether ``READY_PATH`` answers 200 or 503. Raises OSError when it
    cannot bind."""
    server = MetricsServer(render, host, listening_socket(host, port), say, ready)
    try:
        await server.start()
    except BaseException:
        await server.close()
        raise
    return server
