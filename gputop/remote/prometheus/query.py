"""Prometheus's HTTP query API (``/api/v1/query``), read as untrusted input.

The server's answers are decoded here and nowhere else: an answer of at most ``MAX_ANSWER_BYTES``, at most
``MAX_SERIES`` series, label values cut to ``MAX_LABEL_CHARS`` and made printable, values that are finite numbers.
Whatever goes wrong (a bad URL, no server, an error page, an answer that is not Prometheus's) is a
``PrometheusError`` with one line fit to show, never anything else.
"""

from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gputop.sanitize import printable

API_PATH = "/api/v1/query"
TIMEOUT_S = 5.0
"""One query's wait for the server: the refresh thread waits, never the dashboard."""
MAX_ANSWER_BYTES = 32 * 1024 * 1024
"""About 100 000 series of a dozen labels: far past the GPUs of any fleet one dashboard shows."""
MAX_SERIES = 100_000
MAX_LABELS = 64
MAX_LABEL_CHARS = 256
MAX_REASON_CHARS = 200


class PrometheusError(Exception):
    """A query that gave no answer to use; the message is one line, fit to show to the user."""


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels (printable, bounded) and its value."""

    labels: Mapping[str, str]
    value: float


Query = Callable[[str], list[Sample]]
"""Runs one PromQL expression: its instant vector, or ``PrometheusError``."""


def _line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def server_url(text: str) -> str:
    """``text`` checked as a Prometheus server's base URL (``http://prometheus:9090``, a path prefix allowed),
    without a trailing slash. Raises ``PrometheusError`` for anything else."""
    if not text.strip() or not text.isprintable() or any(c.isspace() for c in text):
        raise PrometheusError(f"--prometheus {_line(text)!r}: not a URL")
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise PrometheusError(f"--prometheus {text!r}: give an http:// or https:// URL, such as http://prometheus:9090")
    if not parts.hostname:
        raise PrometheusError(f"--prometheus {text!r}: no host in the URL")
    if parts.username is not None or parts.password is not None:
        raise PrometheusError(f"--prometheus {parts.hostname}: a user or password in the URL is not supported")
    if parts.query or parts.fragment:
        raise PrometheusError(f"--prometheus {text!r}: give the server's base URL, without ?query or #fragment")
    try:
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        raise PrometheusError(f"--prometheus {text!r}: the port is not a number") from None
    return text.rstrip("/")


def http_query(base_url: str, timeout_s: float = TIMEOUT_S) -> Query:
    """A ``Query`` over the server at ``base_url`` (checked with ``server_url``)."""

    def run(expr: str) -> list[Sample]:
        url = base_url + API_PATH + "?" + urllib.parse.urlencode({"query": expr})
        return decode_vector(_fetch(url, base_url, timeout_s))

    return run


def _fetch(url: str, base_url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return _read(response)
    except urllib.error.HTTPError as exc:
        with exc:
            body = _read(exc, MAX_REASON_CHARS * 16)
        raise PrometheusError(f"Prometheus at {base_url} answered {exc.code}: {_error_text(body)}") from None
    except TimeoutError:
        raise PrometheusError(f"no answer from Prometheus at {base_url} within {timeout_s:g} s") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise PrometheusError(f"no answer from Prometheus at {base_url} within {timeout_s:g} s") from None
        reason = exc.reason.strerror if isinstance(exc.reason, OSError) else None
        raise PrometheusError(f"cannot reach Prometheus at {base_url}: {_line(reason or str(exc.reason))}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset connection, a cut answer
        said = _line(str(exc) or type(exc).__name__)
        raise PrometheusError(f"cannot read from Prometheus at {base_url}: {said}") from None


def _read(response: object, limit: int = MAX_ANSWER_BYTES) -> bytes:
    read = getattr(response, "read")  # noqa: B009 (an HTTPResponse or an HTTPError, both file-like)
    data: bytes = read(limit + 1)
    if len(data) > limit:
        if limit < MAX_ANSWER_BYTES:
            return data[:limit]
        raise PrometheusError(f"Prometheus's answer is bigger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB: refused")
    return data


def _error_text(body: bytes) -> str:
    """The reason an error page gives: Prometheus's ``error`` field, or the start of the page."""
    try:
        answer = json.loads(body)
        if isinstance(answer, dict) and isinstance(answer.get("error"), str):
            return _line(answer["error"])
    except (ValueError, RecursionError):
        pass
    return _line(body.decode("utf-8", "replace")) or "an empty page"


def decode_vector(data: bytes) -> list[Sample]:
    """The instant vector of one answer of ``/api/v1/query``. A series that is not as Prometheus writes it (labels
    that are not strings, a value that is not a number) is skipped; an answer that is not Prometheus's at all is a
    ``PrometheusError``."""
    try:
        answer = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deep enough to exhaust the parser
        raise PrometheusError("the answer is not Prometheus's (not JSON): is the URL the server's?") from None
    if not isinstance(answer, dict):
        raise PrometheusError("the answer is not Prometheus's (not a JSON object)")
    if answer.get("status") != "success":
        error = answer.get("error")
        raise PrometheusError(
            f"Prometheus refused the query: {_line(error) if isinstance(error, str) else 'no reason'}"
        )
    body = answer.get("data")
    if not isinstance(body, dict) or body.get("resultType") != "vector" or not isinstance(body.get("result"), list):
        raise PrometheusError("the answer is not an instant vector")
    result = body["result"]
    if len(result) > MAX_SERIES:
        raise PrometheusError(f"Prometheus answered with more than {MAX_SERIES} series: refused")
    samples = []
    for item in result:
        sample = _sample(item)
        if sample is not None:
            samples.append(sample)
    return samples


def _sample(item: object) -> Sample | None:
    if not isinstance(item, dict):
        return None
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or len(metric) > MAX_LABELS:
        return None
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        return None
    try:
        number = float(value[1])
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    labels: dict[str, str] = {}
    for key, text in metric.items():
        if not isinstance(text, str) or len(key) > MAX_LABEL_CHARS:
            return None
        labels[printable(key)] = printable(text[:MAX_LABEL_CHARS])
    return Sample(labels, number)
