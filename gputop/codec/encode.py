"""A ``Snapshot`` as the codec's JSON: the model's dataclass tree, every dataclass an object keyed by field name
(docs/recording.md, "Encoding of snapshots.data"), in the codec's current format."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping

from gputop.model import GpuProcess, Snapshot, Worker

FORMAT = 3
"""The codec's format, the top-level key ``format`` of a snapshot's JSON. Version 1 had no such key, and its
process rows and DataLoader workers held their host process's fields flat beside their own; version 2 nests them
in ``host``; version 3 writes a ``host`` that is the same as the snapshot's ``host_processes`` entry of its PID as
that PID alone (``HOST_REFERENCE_PATHS``)."""
FORMAT_KEY = "format"
HOST_REFERENCE_PATHS = (("processes",), ("training", "workers"))
"""Where format 3 writes a ``host`` as its PID: the process rows, and the workers of each training view."""
HOST_FIELDS = frozenset({(GpuProcess, "host"), (Worker, "host")})
"""The fields that format 3 writes as a PID where they are the snapshot's ``host_processes`` entry of it
(``HOST_REFERENCE_PATHS``)."""


def to_plain(value: object) -> object:
    """``value`` as JSON values: a dataclass an object keyed by field name, a tuple a list, a mapping an object."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


def snapshot_json(snap: Snapshot) -> bytes:
    """The whole snapshot as compact JSON (UTF-8): every dataclass an object keyed by field name, and the
    codec's ``format``."""
    return json.dumps({FORMAT_KEY: FORMAT, **_as_dict(snap)}, separators=(",", ":"), ensure_ascii=False).encode()


def _as_dict(snap: Snapshot) -> dict[str, object]:
    plain = to_plain(snap)
    assert isinstance(plain, dict)
    hosts = {h["pid"]: h for h in typing.cast("list[dict[str, object]]", plain["host_processes"])}
    for row in _host_holders(plain):
        host = row.get("host")
        if type(host) is dict and hosts.get(host.get("pid")) == host:
            row["host"] = host["pid"]
    return plain


def _host_holders(plain: dict[str, object]) -> list[dict[str, object]]:
    """The objects of a snapshot's JSON value that hold a ``host`` (``HOST_REFERENCE_PATHS``); what is not an
    object is left out, for the strict decoder to refuse."""
    found: list[dict[str, object]] = []
    for path in HOST_REFERENCE_PATHS:
        level: list[object] = [plain]
        for key in path:
            level = [item for holder in level if type(holder) is dict for item in _list(holder.get(key))]
        found.extend(row for row in level if type(row) is dict)
    return found


def _list(value: object) -> list[object]:
    return value if type(value) is list else []
