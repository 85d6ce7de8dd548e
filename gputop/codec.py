"""The lossless snapshot codec: a ``Snapshot`` as compact JSON and back, with a strict decoder.

Recordings (``gputop/store/recording.py``) store each snapshot in this form, deflated; ``gputop stream --full``
writes one per line and the hosts view reads them back (``gputop/remote/stream.py``). The JSON is the model's
dataclass tree, every dataclass an object keyed by field name (docs/recording.md, "Encoding of snapshots.data").

A snapshot's JSON may come from another machine or another user: the decoder bounds the text before parsing it,
checks the type and range of every value and makes every string printable ("Reading files from someone else").
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
import zlib
from collections.abc import Callable, Mapping

from gputop.model import (
    CGROUP_PATH_CHARS,
    CONTAINER_ID_CHARS,
    CONTAINER_NAME_CHARS,
    GPM_PROFILE_FIELDS,
    TORCH_MAIN_THREAD,
    Container,
    Gpu,
    HostProcess,
    Snapshot,
    evidence_of,
    frozen_reasons,
)
from gputop.sanitize import printable

MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""The most one snapshot may be, as JSON and as stored (deflated): 800 times a busy 8-GPU machine's 20 KB. Text
and rows beyond it come from someone else and are refused before they are parsed, read or inflated."""
MAX_JSON_TOKENS = 500_000
"""The most commas, colons and opening brackets one snapshot's JSON may hold: a real snapshot has one every 10
bytes or so (about 25 a process), so this is about 5 MB of one, 20,000 processes. Counted before parsing:
``json.loads`` of 16 MiB of tiny values (``[{"a":1},...]``) would take hundreds of MiB; this many, under 50 MiB."""
MAX_TIME = 1e10
"""Times (``Snapshot.time``, process start times) are from 0 to this many seconds since the epoch (the year 2286):
a time like 1e308 overflows the clock formatting of every view."""
MAX_FLOAT = 1e15
"""The largest magnitude of any other float: percentages, watts, seconds, rates."""
MAX_INT = 2**64 - 1
"""Integers are NVML's unsigned 64-bit counters at most (bytes, clocks, ECC errors)."""
_TIME_FIELDS = frozenset({"time", "start_time"})
TEXT_LIMITS: dict[type, dict[str, int]] = {
    Container: {
        "path": CGROUP_PATH_CHARS,
        "id": CONTAINER_ID_CHARS,
        "pod_uid": CONTAINER_NAME_CHARS,
        "name": CONTAINER_NAME_CHARS,
    },
}
"""The longest string each field of these classes may hold, as the collector bounds them: a longer one was not
written by gputop."""
_NOT_TOKENS = bytes(sorted(set(range(256)) - set(b",:[{")))

FORMAT = 3
"""The codec's format, the top-level key ``format`` of a snapshot's JSON. Version 1 had no such key, and its
process rows and DataLoader workers held their host process's fields flat beside their own; version 2 nests them
in ``host``; version 3 writes a ``host`` that is the same as the snapshot's ``host_processes`` entry of its PID as
that PID alone (``HOST_REFERENCE_PATHS``)."""
FORMAT_KEY = "format"
V1_PROCESS_HOST_KEYS = ("visible", "user", "name", "command", "cpu_percent", "rss_bytes", "start_time", "status")
"""A version-1 process row's keys that belong to its host process."""
V1_WORKER_HOST_KEYS = {"parent_pid": "ppid", "status": "status", "cpu_percent": "cpu_percent", "rss_bytes": "rss_bytes"}
"""A version-1 worker's keys that belong to its host process, and the ``HostProcess`` field of each."""
V1_WORKER_NOT_RECORDED = ("user", "name", "command", "start_time", "num_threads")
"""The host fields a version-1 worker never carried: from the snapshot's ``host_processes``, or not recorded."""
V1_NOT_RECORDED = "not recorded"
"""The reason for a host value that a version-1 process row or worker did not carry (a row's parent and thread
count, a worker's name, user, command, start time and thread count) when the snapshot's own ``host_processes``
does not have it either."""
ADDED_LATER: dict[type, tuple[str, ...]] = {
    Gpu: (
        "ecc_enabled",
        "pcie_link_gen",
        "pcie_link_width",
        "pcie_link_gen_max",
        "pcie_link_width_max",
        *GPM_PROFILE_FIELDS,
    ),
    HostProcess: ("container",),
}
"""Fields added after snapshots were first recorded: absent from an older recording or remote gputop, they decode
as None with the reason ``V1_NOT_RECORDED``, so that no null goes without a reason."""


HOST_REFERENCE_PATHS = (("processes",), ("training", "workers"))
"""Where format 3 writes a ``host`` as its PID: the process rows, and the workers of each training view."""


def _to_plain(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    return value


Decoder = Callable[[object], object]


def _fields_of(cls: type) -> tuple[tuple[str, object], ...]:
    """``(name, type hint)`` of every field of a model dataclass."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _brief(value: object) -> str:
    """What a bad value was, in a few words: the value itself may be megabytes, or someone's escape sequences."""
    if isinstance(value, (bool, int, float)) or value is None:
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    return f"a {type(value).__name__}"


@functools.cache
def _decoder(hint: object, epoch: bool = False, optional: bool = False) -> Decoder:
    """A function from the JSON value of a field typed ``hint`` to the model's value, built once per type from the
    type hints (walking the hints anew for every value costs twice as much). It raises ValueError for a value of
    another type, a number out of range (``epoch``: a time in seconds since the epoch) or ``None`` where the hint
    does not allow it; every string comes out ``printable``, since it may have been written by someone else.

    Each decoder checks the value it expects first and ``None`` after: most values are there."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        [inner] = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decoder(inner, epoch, True)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint, optional)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return _checked(list, lambda value: tuple(map(item, value)), optional)
        items = tuple(_decoder(a) for a in args)
        return _checked(list, lambda value: tuple(d(v) for d, v in zip(items, value, strict=True)), optional)
    if origin is Mapping and typing.get_args(hint) == (str, str):
        return _checked(dict, _reasons, optional)
    if hint is float:
        return _number(0.0 if epoch else -MAX_FLOAT, MAX_TIME if epoch else MAX_FLOAT, float, optional)
    if hint is int:
        return _number(-MAX_INT, MAX_INT, int, optional)
    if hint is bool:
        return _flag(optional)
    if hint is str:
        return _optional_text if optional else _text
    if origin is typing.Literal:
        return _one_of(frozenset(typing.get_args(hint)), optional)
    raise TypeError(f"no decoder for {hint!r}")  # a model field of a new kind: teach the decoder about it


def _number(low: float, high: float, kind: type, optional: bool) -> Decoder:
    """A number from ``low`` to ``high``: an int, or for a float field an int or a float (JSON keeps ``61`` an int)."""
    kinds = frozenset({int, kind})
    what = f"{'a number' if kind is float else 'an integer'} from {low:g} to {high:g}"

    def decode(value: object) -> object:
        # type(), not isinstance: JSON's true is an int to Python. NaN fails both comparisons.
        if type(value) in kinds and low <= value <= high:  # type: ignore[operator]
            return value
        if value is None and optional:
            return None
        raise ValueError(f"expected {what}, not {_brief(value)}")

    return decode


def _one_of(allowed: frozenset[object], optional: bool) -> Decoder:
    """One of a ``Literal``'s strings (a state, a kind): anything else is not a value the model can hold."""

    def decode(value: object) -> object:
        if type(value) is str and value in allowed:
            return value
        if value is None and optional:
            return None
        raise ValueError(f"expected one of {', '.join(sorted(map(str, allowed)))}, not {_brief(value)}")

    return decode


def _flag(optional: bool) -> Decoder:
    def decode(value: object) -> object:
        if type(value) is bool or (value is None and optional):
            return value
        raise ValueError(f"expected true or false, not {_brief(value)}")

    return decode


def _text(value: object) -> str:
    if type(value) is str:
        return value if value.isprintable() else printable(value)
    raise ValueError(f"expected a string, not {_brief(value)}")


def _optional_text(value: object) -> str | None:
    if type(value) is str:
        return value if value.isprintable() else printable(value)
    if value is None:
        return None
    raise ValueError(f"expected a string, not {_brief(value)}")


def _reasons(value: dict) -> Mapping[str, str]:
    return frozen_reasons({_text(k): _text(v) for k, v in value.items()} if value else None)


def _dataclass_decoder(cls: type, optional: bool) -> Decoder:
    # Fields are looked up at the first decode: a model class may refer to itself (a tree) through its hints. The
    # tuple is built whole, then published, so a thread decoding at the same time never sees half of it.
    fields: list[tuple[tuple[str, Decoder], ...]] = []

    def decode(value: object) -> object:
        if type(value) is not dict:
            if value is None and optional:
                return None
            raise ValueError(f"expected an object for {cls.__name__}, not {_brief(value)}")
        if not fields:
            fields.append(tuple((name, _decoder(hint, name in _TIME_FIELDS)) for name, hint in _fields_of(cls)))
        # Unknown keys (fields added by a later minor change) are ignored; missing ones take their defaults.
        found: dict[str, object] = {}
        try:
            for name, field in fields[0]:
                if name in value:
                    found[name] = field(value[name])
        except ValueError as exc:  # named on the way out, at no cost to the values that decode
            raise ValueError(f"{cls.__name__}.{name}: {exc}") from None
        for name, limit in TEXT_LIMITS.get(cls, {}).items():
            text = found.get(name)
            if isinstance(text, str) and len(text) > limit:
                raise ValueError(f"{cls.__name__}.{name}: over {limit} characters")
        later = [name for name in ADDED_LATER.get(cls, ()) if name not in value]
        if later:
            reasons = dict(typing.cast("Mapping[str, str]", found.get("unavailable", {})))
            found["unavailable"] = frozen_reasons({**dict.fromkeys(later, V1_NOT_RECORDED), **reasons})
        try:
            return cls(**found)
        except TypeError as exc:  # a field without a default is missing
            raise ValueError(f"{cls.__name__}: {exc}") from None

    return decode


def _checked(kind: type, decode: Callable[[typing.Any], object], optional: bool) -> Decoder:
    what = "an object" if kind is dict else "a list"

    def checked(value: object) -> object:
        if type(value) is kind:
            return decode(value)
        if value is None and optional:
            return None
        raise ValueError(f"expected {what}, not {_brief(value)}")

    return checked


def snapshot_json(snap: Snapshot) -> bytes:
    """The whole snapshot as compact JSON (UTF-8): every dataclass an object keyed by field name, and the
    codec's ``format``."""
    return json.dumps({FORMAT_KEY: FORMAT, **_as_dict(snap)}, separators=(",", ":"), ensure_ascii=False).encode()


def _as_dict(snap: Snapshot) -> dict[str, object]:
    plain = _to_plain(snap)
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


def _resolve_host_references(plain: dict[str, object]) -> None:
    """Format 3 to 2: each ``host`` written as a PID becomes that PID's entry of ``host_processes`` (a copy: the
    decoder makes a ``HostProcess`` of each, equal to the one written). A PID with no entry is left as it is, and
    the decoder refuses it."""
    hosts = {h["pid"]: h for h in _list(plain.get("host_processes")) if type(h) is dict and type(h.get("pid")) is int}
    for row in _host_holders(plain):
        pid = row.get("host")
        if type(pid) is int and pid in hosts:
            row["host"] = dict(hosts[pid])


def _upgraded(plain: object) -> object:
    """A snapshot's JSON value in the current format, from any format this gputop reads. Only a well-formed
    version 1 is reshaped; anything else is left for the strict decoder to refuse."""
    if type(plain) is not dict:
        return plain
    version = plain.pop(FORMAT_KEY, 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise ValueError(f"snapshot format {_brief(version)}: this gputop reads formats 1 to {FORMAT}")
    if version == 3:
        _resolve_host_references(plain)
    if version != 1:
        return plain
    hosts = plain.get("host_processes")
    known = {h["pid"]: h for h in hosts if type(h) is dict and type(h.get("pid")) is int} if type(hosts) is list else {}
    processes = plain.get("processes")
    if type(processes) is list:
        plain["processes"] = [_v1_process(row, known) for row in processes]
    views = plain.get("training")
    if type(views) is list:
        for view in views:
            workers = view.get("workers") if type(view) is dict else None
            if type(workers) is list:
                view["workers"] = [_v1_worker(row, known) for row in workers]
    return plain


def _with_evidence(plain: object) -> object:
    """Training views recorded before they said why they are training views get the evidence their recorded
    values show (a probe report, DataLoader workers, torch's ``pt_main_thread`` name), so that the advisor judges
    an old recording as it did when it was made."""
    views = plain.get("training") if type(plain) is dict else None
    for view in views if type(views) is list else ():
        if type(view) is not dict or "evidence" in view:
            continue
        probe = view.get("probe")
        status = probe.get("status") if type(probe) is dict else None
        workers = bool(view.get("workers") or view.get("workers_replaced"))
        evidence = list(evidence_of(status, workers, False, view.get("name") == TORCH_MAIN_THREAD))
        view["evidence"] = evidence
    return plain


def _v1_process(row: object, hosts: Mapping[object, dict[str, object]]) -> object:
    """A version-1 process row as version 2: its host fields, and their reasons, moved into ``host``. Its parent
    and thread count, which the row never carried, come from the snapshot's ``host_processes`` when it has the
    PID (the recorder took both from the same reading), else are unknown with ``V1_NOT_RECORDED``."""
    if type(row) is not dict:
        return row
    reasons = row.get("unavailable", {})
    if type(reasons) is not dict:
        return row  # left for the decoder to refuse
    pid = row.get("pid")
    host: dict[str, object] = {"pid": pid}
    host_reasons: dict[object, object] = {}
    for key in V1_PROCESS_HOST_KEYS:
        if key in row:
            host[key] = row.pop(key)
        if key in reasons:
            host_reasons[key] = reasons.pop(key)
    same = hosts.get(pid) if type(pid) is int else None
    same_reasons = same.get("unavailable", {}) if same is not None else None
    for key in ("ppid", "num_threads"):
        said = reasons.pop(key, None)  # a version-1 row carried the host's reasons for these, not their values
        if same is not None and key in same and type(same_reasons) is dict:
            host[key] = same[key]
            if key in same_reasons:
                host_reasons[key] = same_reasons[key]
        else:
            host_reasons[key] = V1_NOT_RECORDED if said is None else said
    host["unavailable"] = host_reasons
    return {**row, "unavailable": reasons, "host": host}


def _v1_worker(row: object, hosts: Mapping[object, dict[str, object]]) -> object:
    """A version-1 worker as version 2: its PID, parent, status, CPU and RSS, and their reasons, moved into
    ``host``. The host's other fields, which the worker never carried, come from the snapshot's
    ``host_processes`` entry of the same PID (the collector read both from the same process), else are unknown
    with ``V1_NOT_RECORDED``."""
    if type(row) is not dict:
        return row
    reasons = row.get("unavailable", {})
    if type(reasons) is not dict:
        return row  # left for the decoder to refuse
    pid = row.pop("pid", None)
    same = hosts.get(pid) if type(pid) is int else None
    same_reasons = same.get("unavailable", {}) if same is not None else None
    host: dict[str, object] = {"pid": pid}
    host_reasons: dict[object, object] = {}
    if same is not None and type(same_reasons) is dict:
        host.update((key, same[key]) for key in V1_WORKER_NOT_RECORDED if key in same)
        host_reasons.update((key, same_reasons[key]) for key in V1_WORKER_NOT_RECORDED if key in same_reasons)
        if "visible" in same:
            host["visible"] = same["visible"]
    else:
        host_reasons.update((key, V1_NOT_RECORDED) for key in V1_WORKER_NOT_RECORDED)
    for key, field in V1_WORKER_HOST_KEYS.items():
        if key in row:
            host[field] = row.pop(key)
        if key in reasons:
            host_reasons[field] = reasons.pop(key)
        elif host.get(field) is None:
            host_reasons[field] = V1_NOT_RECORDED
    host["unavailable"] = host_reasons
    return {**row, "unavailable": reasons, "host": host}


def encode_snapshot(snap: Snapshot, zdict: bytes = b"") -> bytes:
    """The compact, lossless encoding of a snapshot stored in ``snapshots.data``: its JSON, deflated with ``zdict``
    as the preset dictionary (the recording's first snapshot, so field names and steady values cost little)."""
    return compress(snapshot_json(snap), zdict)


def compress(text: bytes, zdict: bytes) -> bytes:
    """``text`` deflated (zlib, level 6), with ``zdict`` as the preset dictionary when there is one."""
    packer = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return packer.compress(text) + packer.flush()


def snapshot_from_json(text: str | bytes) -> Snapshot:
    """The snapshot whose ``snapshot_json`` is ``text``. Raises ``ValueError``, and nothing else, on anything else:
    the text may come from another machine or another user. What it returns is well typed throughout: numbers in
    range (``MAX_TIME``, ``MAX_FLOAT``, ``MAX_INT``), strings ``printable``."""
    if isinstance(text, str):
        if len(text) > MAX_SNAPSHOT_BYTES:
            raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
        text = text.encode(errors="surrogatepass")  # a lone surrogate is then bad UTF-8 to json.loads
    elif not isinstance(text, (bytes, bytearray)):
        raise ValueError(f"expected JSON text, not {_brief(text)}")
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
    if len(text.translate(None, _NOT_TOKENS)) > MAX_JSON_TOKENS:  # one pass, the tokens kept
        raise ValueError(f"over {MAX_JSON_TOKENS} JSON values: not a snapshot")
    try:
        plain = json.loads(text)
    except RecursionError:  # json.loads recurses once per level of nesting; a snapshot has a few
        raise ValueError("nested too deeply: not a snapshot") from None
    snap = _decoder(Snapshot)(_with_evidence(_upgraded(plain)))
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap


def decode_snapshot(data: bytes, zdict: bytes = b"") -> Snapshot:
    """The snapshot ``encode_snapshot`` encoded, equal to it with ``==``. Raises ``ValueError``, and nothing else,
    on bad data, after inflating at most ``MAX_SNAPSHOT_BYTES`` of it (a zlib bomb inflates a thousandfold)."""
    if not isinstance(data, bytes):
        raise ValueError(f"expected deflated bytes, not {_brief(data)}")
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
    try:
        unpacker = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
        text = unpacker.decompress(data, MAX_SNAPSHOT_BYTES + 1)
    except zlib.error as exc:
        raise ValueError(str(exc)) from None
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"inflates to over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
    if not unpacker.eof:
        raise ValueError("truncated data")
    return snapshot_from_json(text)
