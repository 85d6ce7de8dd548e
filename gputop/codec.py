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
import operator
import re
import threading
import types
import typing
import zlib
from collections.abc import Callable, Mapping

from gputop.model import (
    CGROUP_PATH_CHARS,
    CONTAINER_ID_CHARS,
    CONTAINER_NAME_CHARS,
    GPM_PROFILE_FIELDS,
    INVALID_VALUE,
    TENSOR_DEVICE,
    TORCH_MAIN_THREAD,
    Container,
    Gpu,
    GpuProcess,
    HostProcess,
    Snapshot,
    TensorMemory,
    Worker,
    evidence_of,
    frozen_reasons,
)
from gputop.plausible import AT_MOST, KEEPS_REASONS, RANGES, parts_over
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
TEXT_FORMS: dict[type, dict[str, re.Pattern[str]]] = {TensorMemory: {"device": re.compile(TENSOR_DEVICE)}}
"""The form each field of these classes must have, as the probe reader checks it: ``cuda:²`` would pass a type
check, and then fail ``int`` where the device's ordinal is read."""
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
K = typing.TypeVar("K")


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


class _Implausible:
    """What a number decodes to that has its field's type but not its range (``gputop.plausible``): the object
    that holds it then has None there, with the reason ``INVALID_VALUE``, or is refused where it keeps no
    reasons."""

    def __repr__(self) -> str:
        return "IMPLAUSIBLE"


IMPLAUSIBLE = _Implausible()
_MARKED = threading.local()
"""``count``: how many numbers this thread has decoded to ``IMPLAUSIBLE``. An object whose decoding moved it holds
one (or one of its parts does): only then are its values looked through."""


@functools.cache
def _decoder(
    hint: object,
    epoch: bool = False,
    optional: bool = False,
    plausible: tuple[float, float] | None = None,
    refuse: bool = False,
) -> Decoder:
    """A function from the JSON value of a field typed ``hint`` to the model's value, built once per type from the
    type hints (walking the hints anew for every value costs twice as much). It raises ValueError for a value of
    another type, a number out of range (``epoch``: a time in seconds since the epoch) or ``None`` where the hint
    does not allow it; every string comes out ``printable``, since it may have been written by someone else.

    A number of the right type outside ``plausible`` (its field's range in ``gputop.plausible``) decodes to
    ``IMPLAUSIBLE``; in a tuple, or with ``refuse``, it raises ValueError. Each decoder checks the value it
    expects first and ``None`` after: most values are there."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        [inner] = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decoder(inner, epoch, True, plausible, refuse)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint, optional)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0], plausible=plausible, refuse=True)
            return _checked(list, lambda value: tuple(map(item, value)), optional)
        items = tuple(_decoder(a, plausible=plausible, refuse=True) for a in args)
        return _checked(list, lambda value: tuple(d(v) for d, v in zip(items, value, strict=True)), optional)
    if origin is Mapping and typing.get_args(hint) == (str, str):
        return _checked(dict, _reasons, optional)
    if hint is float:
        low, high = (0.0, MAX_TIME) if epoch else (-MAX_FLOAT, MAX_FLOAT)
        return _number(low, high, float, optional, plausible, refuse)
    if hint is int:
        return _number(-MAX_INT, MAX_INT, int, optional, plausible, refuse)
    if hint is bool:
        return _flag(optional)
    if hint is str:
        return _optional_text if optional else _text
    if origin is typing.Literal:
        return _one_of(frozenset(typing.get_args(hint)), optional)
    raise TypeError(f"no decoder for {hint!r}")  # a model field of a new kind: teach the decoder about it


def _number(
    low: float, high: float, kind: type, optional: bool, plausible: tuple[float, float] | None, refuse: bool
) -> Decoder:
    """A number from ``low`` to ``high``: an int, or for a float field an int or a float (JSON keeps ``61`` an int).
    One outside ``plausible`` is ``IMPLAUSIBLE`` (with ``refuse``, a ValueError)."""
    kinds = frozenset({int, kind})
    what = f"{'a number' if kind is float else 'an integer'} from {low:g} to {high:g}"
    within = (low, high) if plausible is None else (max(low, plausible[0]), min(high, plausible[1]))
    near, far = within

    def decode(value: object) -> object:
        # type(), not isinstance: JSON's true is an int to Python. NaN fails both comparisons.
        if type(value) in kinds and near <= value <= far:  # type: ignore[operator]
            return value
        if value is None and optional:
            return None
        if type(value) in kinds and low <= value <= high:  # type: ignore[operator]
            if refuse:
                raise ValueError(f"{_brief(value)} is out of range ({near:g} to {far:g})")
            _MARKED.count = _MARKED.__dict__.get("count", 0) + 1
            return IMPLAUSIBLE
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
    ranged, parts = cls in RANGES, tuple(AT_MOST.get(cls, {}).items())

    def decode(value: object) -> object:
        if type(value) is not dict:
            if value is None and optional:
                return None
            raise ValueError(f"expected an object for {cls.__name__}, not {_brief(value)}")
        if not fields:
            fields.append(_field_decoders(cls))
        # Unknown keys (fields added by a later minor change) are ignored; missing ones take their defaults.
        found: dict[str, object] = {}
        before = _MARKED.__dict__.get("count", 0) if ranged else 0
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
        for name, form in TEXT_FORMS.get(cls, {}).items():
            text = found.get(name)
            if isinstance(text, str) and not form.fullmatch(text):
                raise ValueError(f"{cls.__name__}.{name}: not of the form {form.pattern}")
        marked = ranged and _MARKED.__dict__.get("count", 0) != before
        if marked or (parts and _over(found.get, parts)):
            bad = _out_of_range(cls, found.get, marked, found)
            if bad:
                found["unavailable"] = _implausible(cls, bad, found.get, found.get("unavailable"))
                found.update(dict.fromkeys(bad))
        later = [name for name in ADDED_LATER.get(cls, ()) if name not in value]
        if later:
            reasons = dict(typing.cast("Mapping[str, str]", found.get("unavailable", {})))
            found["unavailable"] = frozen_reasons({**dict.fromkeys(later, V1_NOT_RECORDED), **reasons})
        try:
            return cls(**found)
        except TypeError as exc:  # a field without a default is missing
            raise ValueError(f"{cls.__name__}: {exc}") from None

    return decode


def _out_of_range(cls: type, value_of: Callable[[str], object], marked: bool, names: typing.Iterable[str]) -> list[str]:
    """The fields of a ``cls`` out of their range: those ``marked`` ``IMPLAUSIBLE`` by their decoder (looked for
    among ``names`` only when some are), and the parts that exceed their whole (``AT_MOST``)."""
    bad = [name for name in names if value_of(name) is IMPLAUSIBLE] if marked else []
    return bad + parts_over(cls, value_of, bad)


def _over(value_of: Callable[[K], object], parts: tuple[tuple[K, K], ...]) -> bool:
    """Whether a part exceeds its whole (``value_of`` a position or a name of each; no value ``IMPLAUSIBLE``)."""
    for part_key, whole_key in parts:
        part, whole = value_of(part_key), value_of(whole_key)
        if part is not None and whole is not None and part > whole:  # type: ignore[operator]
            return True
    return False


def _implausible(cls: type, bad: list[str], value_of: Callable[[str], object], reasons: object) -> Mapping[str, str]:
    """The reasons of a ``cls`` whose ``bad`` fields are out of range (``gputop.plausible``), which become None:
    ``INVALID_VALUE`` for each. ValueError for a class that keeps no reasons: no gputop wrote such a value."""
    if cls not in KEEPS_REASONS:
        name = bad[0]
        raise ValueError(f"{cls.__name__}.{name}: {_brief(value_of(name))} is out of range")
    return frozen_reasons({**typing.cast("Mapping[str, str]", reasons or {}), **dict.fromkeys(bad, INVALID_VALUE)})


HOST_FIELDS = frozenset({(GpuProcess, "host"), (Worker, "host")})
"""The fields that format 3 writes as a PID where they are the snapshot's ``host_processes`` entry of it
(``HOST_REFERENCE_PATHS``)."""
_HOSTS = threading.local()
"""While a snapshot of format 3 or later decodes in this thread: ``by_pid``, its decoded ``host_processes`` by PID,
which a ``host`` written as a PID stands for (decoded once, and shared, as the sampler shares them)."""


def _field_decoders(cls: type) -> tuple[tuple[str, Decoder], ...]:
    """``(name, decoder)`` of every field of ``cls``, in the order they are decoded: a snapshot's
    ``host_processes`` first, so that the hosts written as a PID in its rows and workers can be resolved."""
    decoders = []
    for name, hint in _fields_of(cls):
        if (cls, name) in HOST_FIELDS:
            decoders.append((name, _host_decoder(typing.get_origin(hint) in (typing.Union, types.UnionType))))
        elif cls is Snapshot and name == "host_processes":
            decoders.insert(0, (name, _publishing_hosts(_decoder(hint))))
        else:
            decoders.append((name, _decoder(hint, name in _TIME_FIELDS, plausible=RANGES.get(cls, {}).get(name))))
    return tuple(decoders)


def _publishing_hosts(decode: Decoder) -> Decoder:
    def publish(value: object) -> object:
        hosts = typing.cast("tuple[HostProcess, ...]", decode(value))
        if getattr(_HOSTS, "by_pid", None) is not None:  # a format that writes references
            _HOSTS.by_pid = {host.pid: host for host in hosts}
        return hosts

    return publish


def _host_decoder(optional: bool) -> Decoder:
    """A ``host`` field: a ``HostProcess`` object, or (format 3 and later) the PID of the snapshot's
    ``host_processes`` entry it is, which it then is: the very object decoded there."""
    whole = _decoder(HostProcess, False, optional)

    def decode(value: object) -> object:
        if type(value) is int:
            hosts = getattr(_HOSTS, "by_pid", None)
            host = hosts.get(value) if hosts else None
            if host is None:
                raise ValueError(f"expected an object for HostProcess or a PID in host_processes, not {_brief(value)}")
            return host
        return whole(value)

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


def _upgraded(plain: object) -> tuple[object, int]:
    """A snapshot's JSON value in the current format, from any format this gputop reads, and its format. Only a
    well-formed version 1 is reshaped; anything else is left for the strict decoder to refuse. (A ``host`` that
    format 3 wrote as a PID is resolved as it is decoded: ``_host_decoder``.)"""
    if type(plain) is not dict:
        return plain, FORMAT
    version = plain.pop(FORMAT_KEY, 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise ValueError(f"snapshot format {_brief(version)}: this gputop reads formats 1 to {FORMAT}")
    if version != 1:
        return plain, version
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
    return plain, version


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


def compress(text: bytes, zdict: bytes, level: int = 6) -> bytes:
    """``text`` deflated (zlib, ``level``), with ``zdict`` as the preset dictionary when there is one."""
    packer = zlib.compressobj(level, zdict=zdict) if zdict else zlib.compressobj(level)
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
    plain, version = _upgraded(plain)
    _HOSTS.by_pid = {} if version >= 3 else None
    try:
        snap = _decoder(Snapshot)(_with_evidence(plain))
    finally:
        _HOSTS.by_pid = None
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap


def decode_snapshot(data: bytes, zdict: bytes = b"") -> Snapshot:
    """The snapshot ``encode_snapshot`` encoded, equal to it with ``==``. Raises ``ValueError``, and nothing else,
    on bad data, after inflating at most ``MAX_SNAPSHOT_BYTES`` of it (a zlib bomb inflates a thousandfold)."""
    return snapshot_from_json(inflate(data, zdict))


def inflate(data: object, zdict: bytes = b"") -> bytes:
    """What ``compress`` deflated. Raises ``ValueError``, and nothing else, on bad data, after inflating at most
    ``MAX_SNAPSHOT_BYTES`` of it (a zlib bomb inflates a thousandfold)."""
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
    return text


# -- deltas: a snapshot written as what changed since the one before it (recording format 4) ----------------------

DELTA = b"D"
"""The first byte of a recording row that holds a snapshot as its changes from a whole snapshot some rows before it
(``delta_json``); a whole snapshot's row is deflated JSON, whose first byte is zlib's (0x78). A delta adds no more
values than it holds, so a snapshot read from one stays within twice what one snapshot may be."""

_FIELD_DATA, _FIELD_OBJECT, _FIELD_OBJECTS, _FIELD_NUMBER = 0, 1, 2, 3
"""How a delta writes a field that changed: its value whole; a dataclass as its own changed fields; a tuple of
dataclasses item by item; a number whole (checked in line when it is one, by its decoder otherwise)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """What a delta needs of a model class: its fields, how each changes, and how to make an instance fast."""

    cls: type
    names: tuple[str, ...]
    position: dict[str, int]
    kinds: tuple[int, ...]
    classes: tuple[type | None, ...]
    """The dataclass of an ``_FIELD_OBJECT`` or ``_FIELD_OBJECTS`` field."""
    decoders: tuple[Decoder, ...]
    values: Callable[[object], tuple[object, ...]]
    """Every field's value of an instance, in order."""
    build: Callable[[list[object]], object]
    """An instance with these field values, in order (without ``__init__``, which checks nothing the decoders have
    not: it only stores them)."""
    key: Callable[[object], object]
    """What identifies an item of a tuple across snapshots (a GPU's index, a process's PID...): its first two
    fields of a number, a string or a state."""
    fields: dict[str, tuple[int, int, Decoder, type | None, float, float, frozenset[type]]]
    """By name: position, kind, decoder, dataclass, and for a number the range and types its decoder accepts."""
    limits: tuple[tuple[int, str, int], ...]
    """``TEXT_LIMITS`` of the class: position, name, most characters."""
    forms: tuple[tuple[int, str, re.Pattern[str]], ...]
    """``TEXT_FORMS`` of the class: position, name, pattern."""
    ranged: bool
    """Whether ``gputop.plausible`` holds any of its numbers to a range."""
    parts: tuple[tuple[int, int], ...]
    """The positions of each number that is part of another, and of that whole (``gputop.plausible.AT_MOST``)."""


_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    """The ``_Shape`` of a model class, made once."""
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _make_shape(cls)
    return shape


def _make_shape(cls: type) -> _Shape:
    names, kinds, classes, scalars = [], [], [], []
    ranges: dict[str, tuple[float, float, frozenset[type]]] = {}
    decoders = dict(_field_decoders(cls))
    for name, hint in _fields_of(cls):
        inner = (
            [a for a in typing.get_args(hint) if a is not type(None)]
            if typing.get_origin(hint)
            in (
                typing.Union,
                types.UnionType,
            )
            else [hint]
        )
        args = typing.get_args(inner[0]) if len(inner) == 1 else ()
        if (cls, name) in HOST_FIELDS:
            kind, sub = _FIELD_DATA, None
        elif len(inner) == 1 and isinstance(inner[0], type) and dataclasses.is_dataclass(inner[0]):
            kind, sub = _FIELD_OBJECT, inner[0]
        elif (
            typing.get_origin(inner[0]) is tuple
            and len(args) == 2
            and args[1] is Ellipsis
            and isinstance(args[0], type)
            and dataclasses.is_dataclass(args[0])
        ):
            kind, sub = _FIELD_OBJECTS, args[0]
        else:
            kind, sub = _FIELD_DATA, None
        if kind == _FIELD_DATA and len(inner) == 1 and inner[0] in (int, float) and (cls, name) not in HOST_FIELDS:
            kind = _FIELD_NUMBER
            epoch = inner[0] is float and name in _TIME_FIELDS
            low, high = (
                (-MAX_INT, MAX_INT) if inner[0] is int else (0.0, MAX_TIME) if epoch else (-MAX_FLOAT, MAX_FLOAT)
            )
            plausible = RANGES.get(cls, {}).get(name)
            if plausible is not None:  # checked in line within it; its decoder says what a value outside it is
                low, high = max(low, plausible[0]), min(high, plausible[1])
            ranges[name] = (low, high, frozenset({int, inner[0]}))
        names.append(name)
        kinds.append(kind)
        classes.append(sub)
        if len(inner) == 1 and (inner[0] in (int, str, float, bool) or typing.get_origin(inner[0]) is typing.Literal):
            scalars.append(name)
    setters = {f"set{i}": getattr(cls, name).__set__ for i, name in enumerate(names)}
    # Straight-line code, one slot store per field: a third of the time of the dataclass's __init__.
    source = "def build(values):\n    made = new(cls)\n"
    source += "".join(f"    set{i}(made, values[{i}])\n" for i in range(len(names)))
    source += "    return made\n"
    scope: dict[str, object] = {"new": object.__new__, "cls": cls, **setters}
    exec(compile(source, f"<gputop.codec build {cls.__name__}>", "exec"), scope)
    getter = operator.attrgetter(*names)
    first = operator.attrgetter(*scalars[:2]) if scalars else (lambda obj: None)
    return _Shape(
        cls=cls,
        names=tuple(names),
        position={name: i for i, name in enumerate(names)},
        kinds=tuple(kinds),
        classes=tuple(classes),
        decoders=tuple(decoders[name] for name in names),
        values=getter if len(names) > 1 else (lambda obj: (getter(obj),)),
        build=typing.cast("Callable[[list[object]], object]", scope["build"]),
        key=first,
        fields={
            name: (i, kind, decoders[name], sub, *ranges.get(name, (0.0, 0.0, frozenset())))
            for i, (name, kind, sub) in enumerate(zip(names, kinds, classes, strict=True))
        },
        limits=tuple((names.index(name), name, limit) for name, limit in TEXT_LIMITS.get(cls, {}).items()),
        forms=tuple((names.index(name), name, form) for name, form in TEXT_FORMS.get(cls, {}).items()),
        ranged=cls in RANGES,
        parts=tuple((names.index(part), names.index(whole)) for part, whole in AT_MOST.get(cls, {}).items()),
    )


def delta_json(snap: Snapshot, base: Snapshot) -> bytes:
    """``snap`` as its changes from ``base`` (docs/recording.md, "Deltas"), compact JSON (UTF-8), which
    ``snapshot_from_delta`` turns back into ``snap`` given ``base``."""
    hosts = {host.pid: host for host in snap.host_processes}
    return json.dumps(_object_delta(snap, base, hosts), separators=(",", ":"), ensure_ascii=False).encode()


def _object_delta(new: object, old: object, hosts: dict[int, HostProcess]) -> dict[str, object]:
    shape = _shape(type(new))
    changed: dict[str, object] = {}
    for name, kind, _sub, a, b in zip(
        shape.names, shape.kinds, shape.classes, shape.values(new), shape.values(old), strict=True
    ):
        if a is b or a == b:
            continue
        if kind == _FIELD_OBJECT and a is not None and b is not None:
            changed[name] = _object_delta(a, b, hosts)
        elif kind == _FIELD_OBJECTS:
            changed[name] = _items_delta(a, b, hosts)  # type: ignore[arg-type]
        else:
            changed[name] = _whole(a, hosts, (type(new), name) in HOST_FIELDS)
    return changed


def _items_delta(new: tuple[object, ...], old: tuple[object, ...], hosts: dict[int, HostProcess]) -> list[object]:
    """A tuple of dataclasses, item by item: the index of the item before that it is (``3``), that index and the
    item's changes from it (``[3, {...}]``), or the item whole (``{...}``). Each item before is used once at most."""
    if not old:
        return [_whole(item, hosts) for item in new]
    key = _shape(type(old[0])).key
    where: dict[object, int] = {}
    for i, item in enumerate(old):
        where.setdefault((type(item), key(item)), i)
    out: list[object] = []
    for item in new:
        i = where.pop((type(item), _shape(type(item)).key(item)), -1)
        if i < 0:
            out.append(_whole(item, hosts))
        elif item is old[i] or item == old[i]:
            out.append(i)
        else:
            out.append([i, _object_delta(item, old[i], hosts)])
    return out


def _whole(value: object, hosts: dict[int, HostProcess], host_field: bool = False) -> object:
    """A value as a snapshot's JSON writes it, a ``host`` the same as ``hosts``' entry of its PID as that PID."""
    if host_field and isinstance(value, HostProcess):
        same = hosts.get(value.pid)
        if same is value or same == value:
            return value.pid
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        shape = _shape(type(value))
        return {
            name: (
                _whole(v, hosts, (shape.cls, name) in HOST_FIELDS)
                if kind == _FIELD_OBJECT or (shape.cls, name) in HOST_FIELDS
                else [_whole(item, hosts) for item in typing.cast("tuple[object, ...]", v)]
                if kind == _FIELD_OBJECTS
                else _to_plain(v)
            )
            for name, kind, v in zip(shape.names, shape.kinds, shape.values(value), strict=True)
        }
    return _to_plain(value)


def json_tokens(text: bytes) -> int:
    """How many commas, colons and opening brackets ``text`` holds: about how many values its JSON has."""
    return len(text.translate(None, _NOT_TOKENS))


TOKEN_BYTES = 64
"""The most memory one JSON value of a snapshot takes once decoded, beyond its characters: a string's header and
its slot in a tuple (57 bytes for ``"ab",``), a float (24) or an int (36) and its slot, a reason's two strings and
its place in the mapping (about 65 a token)."""
OBJECT_BYTES = 512
"""The most one JSON object takes once decoded, beyond its values: a model object and the ones its fields make
by default (``{"pid":1}`` as a training view: 516 bytes, with its default probe report, pin status and main thread;
about 400 as a host process)."""


def decoded_bytes(text: bytes) -> int:
    """At most how much memory the snapshot decoded from the JSON ``text`` (or the changes it makes to a whole
    snapshot) holds: what a cache of decoded snapshots counts. Its characters, four bytes each where a string may
    be wide (one character beyond Latin-1 makes Python store every character of its string in four bytes: a
    16 MiB row of 'a's and one emoji decodes to 64 MiB), else one; ``TOKEN_BYTES`` a value; ``OBJECT_BYTES`` an
    object. Measured with tracemalloc over real snapshots and the hostile ones that hold the most per byte
    (tests/security/test_snapshot_decoder.py), it is never below what a snapshot holds, and 4 to 20 times what a
    real one does: a replay of an 8-GPU box keeps 512 snapshots in 40 MiB of it."""
    wide = not text.isascii() or b"\\u" in text
    objects = text.count(b"{") + 1  # and the snapshot a row of changes makes anew, with the lists it patches
    return len(text) * (4 if wide else 1) + TOKEN_BYTES * json_tokens(text) + OBJECT_BYTES * objects


def snapshot_from_delta(text: bytes, base: Snapshot) -> Snapshot:
    """The snapshot whose ``delta_json`` from ``base`` is ``text``. Raises ``ValueError``, and nothing else, on
    anything else; every value that changed is checked as ``snapshot_from_json`` checks it, and what did not
    change is ``base``'s own (an item of a tuple used once at most, so that a delta adds no more values than it
    holds)."""
    if not isinstance(text, (bytes, bytearray)):
        raise ValueError(f"expected JSON text, not {_brief(text)}")
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
    if json_tokens(text) > MAX_JSON_TOKENS:
        raise ValueError(f"over {MAX_JSON_TOKENS} JSON values: not a snapshot")
    try:
        delta = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply: not a snapshot") from None
    if type(delta) is not dict:
        raise ValueError(f"expected an object for a snapshot's changes, not {_brief(delta)}")
    shape = _shape(Snapshot)
    hosts = base.host_processes
    if "host_processes" in delta:
        try:
            hosts = typing.cast("tuple[HostProcess, ...]", _patch_items(delta["host_processes"], hosts, HostProcess))
        except ValueError as exc:
            raise ValueError(f"Snapshot.host_processes: {exc}") from None
    _HOSTS.by_pid = {host.pid: host for host in hosts}
    try:
        values = list(shape.values(base))
        values[shape.position["host_processes"]] = hosts
        snap = _patch_fields(delta, values, shape, skip="host_processes")
    finally:
        _HOSTS.by_pid = None
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap


def _patch_object(delta: object, old: object, cls: type) -> object:
    if type(delta) is not dict:
        raise ValueError(f"expected an object for {cls.__name__}'s changes, not {_brief(delta)}")
    shape = _shape(cls)
    return _patch_fields(delta, list(shape.values(old)), shape)


def _patch_fields(delta: dict[str, object], values: list[object], shape: _Shape, skip: str = "") -> object:
    """An instance of ``shape.cls`` with ``values``, the fields in ``delta`` changed. Unknown keys are ignored, as
    a whole snapshot's are."""
    fields = shape.fields
    name = ""
    marked = False
    try:
        for name, value in delta.items():
            field = fields.get(name)
            if field is None or name == skip:
                continue
            i, kind, decode, sub, low, high, numeric = field
            if kind == _FIELD_NUMBER:
                # type(), not isinstance: JSON's true is an int to Python. NaN fails both comparisons.
                if type(value) in numeric and low <= value <= high:  # type: ignore[operator]
                    values[i] = value
                else:  # None where allowed, IMPLAUSIBLE out of its range, else the decoder's error
                    decoded = values[i] = decode(value)
                    marked = marked or decoded is IMPLAUSIBLE
            elif kind == _FIELD_DATA or value is None or values[i] is None:
                values[i] = decode(value)
            elif kind == _FIELD_OBJECT:
                values[i] = _patch_object(value, values[i], typing.cast("type", sub))
            else:
                values[i] = _patch_items(value, values[i], typing.cast("type", sub))
    except ValueError as exc:
        raise ValueError(f"{shape.cls.__name__}.{name}: {exc}") from None
    for i, field_name, limit in shape.limits:
        text = values[i]
        if isinstance(text, str) and len(text) > limit:
            raise ValueError(f"{shape.cls.__name__}.{field_name}: over {limit} characters")
    for i, field_name, form in shape.forms:
        text = values[i]
        if isinstance(text, str) and not form.fullmatch(text):
            raise ValueError(f"{shape.cls.__name__}.{field_name}: not of the form {form.pattern}")
    if marked or (shape.parts and _over(values.__getitem__, shape.parts)):
        position = shape.position

        def value_of(name: str) -> object:
            return values[position[name]]

        bad = _out_of_range(shape.cls, value_of, marked, shape.names)
        if bad:
            where = position.get("unavailable")
            reasons = _implausible(shape.cls, bad, value_of, None if where is None else values[where])
            assert where is not None  # a class without reasons is refused above
            values[where] = reasons
            for name in bad:
                values[position[name]] = None
    return shape.build(values)


def _patch_items(delta: object, old: object, cls: type) -> tuple[object, ...]:
    if type(delta) is not list:
        raise ValueError(f"expected a list, not {_brief(delta)}")
    if type(old) is not tuple:
        raise ValueError("changes to a list the snapshot before did not have")
    whole = _decoder(cls)
    used: set[int] = set()
    items: list[object] = []
    for entry in delta:
        if type(entry) is dict:
            items.append(whole(entry))
            continue
        if type(entry) is list and len(entry) == 2:
            i, changes = entry
        else:
            i, changes = entry, None
        if type(i) is not int or not 0 <= i < len(old) or i in used:
            raise ValueError(f"expected an item, or an unused index of the list before, not {_brief(i)}")
        used.add(i)
        items.append(old[i] if changes is None else _patch_object(changes, old[i], cls))
    return tuple(items)


MAX_CHAIN_ROWS = 255
"""The most rows a delta may follow its whole snapshot by: the distance is one byte of the row."""


@dataclasses.dataclass(frozen=True, slots=True)
class Keyframe:
    """A whole snapshot of a recording as read, with what the delta rows after it need: its JSON text and that of
    the delta right after it (``reference``, once read), their preset dictionary (``delta_dictionary``)."""

    snapshot: Snapshot
    text: bytes
    rowid: int
    reference: bytes | None = None
    weight: int = 0
    """At most the memory its snapshot holds (``decoded_bytes``)."""


def delta_dictionary(whole: bytes, reference: bytes | None) -> bytes:
    """The preset dictionary of a delta row: the JSON text of its whole snapshot, and for the rows after the first
    delta that delta's text (``reference``), which holds what changes at every snapshot, laid out as each delta
    lays it out; zlib uses the last 32 KiB."""
    return (whole + reference if reference is not None else whole)[-32768:]


def encode_row(text: bytes, zdict: bytes, behind: int = 0) -> bytes:
    """A recording row of format 4: a whole snapshot (``snapshot_json``) deflated with the recording's preset
    dictionary, as in format 3; or, ``behind`` rows after the whole snapshot it changes (1 to
    ``MAX_CHAIN_ROWS``), ``DELTA``, that distance as one byte, and the ``delta_json`` deflated with ``zdict``
    (``delta_dictionary``)."""
    if not behind:
        return compress(text, zdict)
    if not 1 <= behind <= MAX_CHAIN_ROWS:
        raise ValueError(f"a delta {behind} rows after its whole snapshot")
    return DELTA + bytes([behind]) + compress(text, zdict, 9)


def row_behind(data: object) -> int:
    """How many rows before this one its whole snapshot is: 0 for a whole snapshot (or data that is none)."""
    if isinstance(data, bytes) and data[:1] == DELTA and len(data) > 1:
        return data[1]
    return 0


def decode_row(data: object, zdict: bytes, rowid: int, key: Keyframe | None) -> tuple[Snapshot, Keyframe, int]:
    """The snapshot of a format-4 row ``rowid``, the whole snapshot the rows after it change, and at most how much
    memory the snapshot holds besides that whole snapshot's (``decoded_bytes``; 0 for a whole one): the row's own
    if it is one (decoded with the recording's preset dictionary ``zdict``), else ``key``, which a delta needs,
    with its ``reference`` once that is read. Raises ``ValueError``, and nothing else, on bad data, or a delta
    whose whole snapshot (or, after the first, the first delta) is not at hand. A delta's snapshot shares the
    values it does not change with its whole snapshot, and so keeps it alive."""
    behind = row_behind(data)
    if not behind:
        text = inflate(data, zdict)
        key = Keyframe(snapshot_from_json(text), text, rowid, weight=decoded_bytes(text))
        return key.snapshot, key, 0
    if key is None or key.rowid != rowid - behind:
        raise ValueError(f"the changes from row {rowid - behind}, which cannot be read")
    if behind > 1 and key.reference is None:
        raise ValueError(f"the changes from row {rowid - behind}, whose first changes cannot be read")
    assert isinstance(data, bytes)
    text = inflate(data[2:], delta_dictionary(key.text, key.reference if behind > 1 else None))
    snap = snapshot_from_delta(text, key.snapshot)
    return snap, dataclasses.replace(key, reference=text) if behind == 1 else key, decoded_bytes(text)
