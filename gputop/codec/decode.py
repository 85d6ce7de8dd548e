"""The strict decoder: a snapshot's JSON, from any format this gputop reads, back into a ``Snapshot``.

A snapshot's JSON may come from another machine or another user: the text is bounded before it is parsed
(``gputop.codec.bounds``), and every value is checked against its field's type hint and range
(``gputop.plausible``) and every string made printable ("Reading files from someone else" in docs/recording.md).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import types
import typing
from collections.abc import Callable, Mapping

from gputop.codec.bounds import (
    MAX_FLOAT,
    MAX_INT,
    MAX_SNAPSHOT_BYTES,
    MAX_TIME,
    TEXT_FORMS,
    TEXT_LIMITS,
    TIME_FIELDS,
    brief,
    parse,
)
from gputop.codec.encode import HOST_FIELDS
from gputop.codec.upgrade import ADDED_LATER, V1_NOT_RECORDED, upgraded, with_evidence
from gputop.model import INVALID_VALUE, HostProcess, Snapshot, frozen_reasons
from gputop.plausible import AT_MOST, KEEPS_REASONS, RANGES, parts_over
from gputop.sanitize import printable

Decoder = Callable[[object], object]
K = typing.TypeVar("K")


def fields_of(cls: type) -> tuple[tuple[str, object], ...]:
    """``(name, type hint)`` of every field of a model dataclass."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


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
def decoder(
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
        return decoder(inner, epoch, True, plausible, refuse)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint, optional)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = decoder(args[0], plausible=plausible, refuse=True)
            return _checked(list, lambda value: tuple(map(item, value)), optional)
        items = tuple(decoder(a, plausible=plausible, refuse=True) for a in args)
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
    floating = kind is float
    what = f"{'a number' if floating else 'an integer'} from {low:g} to {high:g}"
    within = (low, high) if plausible is None else (max(low, plausible[0]), min(high, plausible[1]))
    near, far = within

    def decode(value: object) -> object:
        # type(), not isinstance: JSON's true is an int to Python. NaN fails both comparisons.
        if ((floating and type(value) is float) or type(value) is int) and near <= value <= far:
            return value
        if value is None and optional:
            return None
        if ((floating and type(value) is float) or type(value) is int) and low <= value <= high:
            if refuse:
                raise ValueError(f"{brief(value)} is out of range ({near:g} to {far:g})")
            _MARKED.count = _MARKED.__dict__.get("count", 0) + 1
            return IMPLAUSIBLE
        raise ValueError(f"expected {what}, not {brief(value)}")

    return decode


def _one_of(allowed: frozenset[object], optional: bool) -> Decoder:
    """One of a ``Literal``'s strings (a state, a kind): anything else is not a value the model can hold."""

    def decode(value: object) -> object:
        if type(value) is str and value in allowed:
            return value
        if value is None and optional:
            return None
        raise ValueError(f"expected one of {', '.join(sorted(map(str, allowed)))}, not {brief(value)}")

    return decode


def _flag(optional: bool) -> Decoder:
    def decode(value: object) -> object:
        if type(value) is bool or (value is None and optional):
            return value
        raise ValueError(f"expected true or false, not {brief(value)}")

    return decode


def _text(value: object) -> str:
    if type(value) is str:
        return value if value.isprintable() else printable(value)
    raise ValueError(f"expected a string, not {brief(value)}")


def _optional_text(value: object) -> str | None:
    if type(value) is str:
        return value if value.isprintable() else printable(value)
    if value is None:
        return None
    raise ValueError(f"expected a string, not {brief(value)}")


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
            raise ValueError(f"expected an object for {cls.__name__}, not {brief(value)}")
        if not fields:
            fields.append(field_decoders(cls))
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
        if marked or (parts and parts_exceed(found.get, parts)):
            bad = fields_out_of_range(cls, found.get, marked, found)
            if bad:
                found["unavailable"] = implausible_reasons(cls, bad, found.get, found.get("unavailable"))
                found.update(dict.fromkeys(bad))
        later = [name for name in ADDED_LATER.get(cls, ()) if name not in value]
        if later:
            unwritten = getattr(UNWRITTEN, "fields", None)
            if unwritten is not None:
                unwritten.update((cls, name) for name in later)
            reasons = dict(typing.cast("Mapping[str, str]", found.get("unavailable", {})))
            found["unavailable"] = frozen_reasons({**dict.fromkeys(later, V1_NOT_RECORDED), **reasons})
        try:
            return cls(**found)
        except TypeError as exc:  # a field without a default is missing
            raise ValueError(f"{cls.__name__}: {exc}") from None

    return decode


def fields_out_of_range(
    cls: type, value_of: Callable[[str], object], marked: bool, names: typing.Iterable[str]
) -> list[str]:
    """The fields of a ``cls`` out of their range: those ``marked`` ``IMPLAUSIBLE`` by their decoder (looked for
    among ``names`` only when some are), and the parts that exceed their whole (``AT_MOST``)."""
    bad = [name for name in names if value_of(name) is IMPLAUSIBLE] if marked else []
    return bad + parts_over(cls, value_of, bad)


def parts_exceed(value_of: Callable[[K], object], parts: tuple[tuple[K, K], ...]) -> bool:
    """Whether a part exceeds its whole (``value_of`` a position or a name of each; no value ``IMPLAUSIBLE``)."""
    for part_key, whole_key in parts:
        part, whole = value_of(part_key), value_of(whole_key)
        if isinstance(part, (int, float)) and isinstance(whole, (int, float)) and part > whole:  # None: not known
            return True
    return False


def implausible_reasons(
    cls: type, bad: list[str], value_of: Callable[[str], object], reasons: object
) -> Mapping[str, str]:
    """The reasons of a ``cls`` whose ``bad`` fields are out of range (``gputop.plausible``), which become None:
    ``INVALID_VALUE`` for each. ValueError for a class that keeps no reasons: no gputop wrote such a value."""
    if cls not in KEEPS_REASONS:
        name = bad[0]
        raise ValueError(f"{cls.__name__}.{name}: {brief(value_of(name))} is out of range")
    return frozen_reasons({**typing.cast("Mapping[str, str]", reasons or {}), **dict.fromkeys(bad, INVALID_VALUE)})


HOSTS = threading.local()
"""While a snapshot of format 3 or later decodes in this thread: ``by_pid``, its decoded ``host_processes`` by PID,
which a ``host`` written as a PID stands for (decoded once, and shared, as the sampler shares them)."""


UNWRITTEN = threading.local()
"""While a whole snapshot decodes in this thread with ``fields`` a set: each ``(class, field)`` of ``ADDED_LATER``
that its writer did not write, and so did not know (``snapshot_unwritten``)."""


def snapshot_unwritten(text: bytes) -> tuple[Snapshot, frozenset[tuple[type, str]]]:
    """``snapshot_from_json(text)``, and the fields added later than its writer knew: the rows of changes that
    follow it in a recording (``gputop.codec.delta``) cannot name them either, and keep them not recorded."""
    found: set[tuple[type, str]] = set()
    UNWRITTEN.fields = found
    try:
        return snapshot_from_json(text), frozenset(found)
    finally:
        UNWRITTEN.fields = None


def field_decoders(cls: type) -> tuple[tuple[str, Decoder], ...]:
    """``(name, decoder)`` of every field of ``cls``, in the order they are decoded: a snapshot's
    ``host_processes`` first, so that the hosts written as a PID in its rows and workers can be resolved."""
    decoders = []
    for name, hint in fields_of(cls):
        if (cls, name) in HOST_FIELDS:
            decoders.append((name, _host_decoder(typing.get_origin(hint) in (typing.Union, types.UnionType))))
        elif cls is Snapshot and name == "host_processes":
            decoders.insert(0, (name, _publishing_hosts(decoder(hint))))
        else:
            decoders.append((name, decoder(hint, name in TIME_FIELDS, plausible=RANGES.get(cls, {}).get(name))))
    return tuple(decoders)


def _publishing_hosts(decode: Decoder) -> Decoder:
    def publish(value: object) -> object:
        hosts = typing.cast("tuple[HostProcess, ...]", decode(value))
        if getattr(HOSTS, "by_pid", None) is not None:  # a format that writes references
            HOSTS.by_pid = {host.pid: host for host in hosts}
        return hosts

    return publish


def _host_decoder(optional: bool) -> Decoder:
    """A ``host`` field: a ``HostProcess`` object, or (format 3 and later) the PID of the snapshot's
    ``host_processes`` entry it is, which it then is: the very object decoded there."""
    whole = decoder(HostProcess, False, optional)

    def decode(value: object) -> object:
        if type(value) is int:
            hosts = getattr(HOSTS, "by_pid", None)
            host = hosts.get(value) if hosts else None
            if host is None:
                raise ValueError(f"expected an object for HostProcess or a PID in host_processes, not {brief(value)}")
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
        raise ValueError(f"expected {what}, not {brief(value)}")

    return checked


def snapshot_from_json(text: str | bytes) -> Snapshot:
    """The snapshot whose ``snapshot_json`` is ``text``. Raises ``ValueError``, and nothing else, on anything else:
    the text may come from another machine or another user. What it returns is well typed throughout: numbers in
    range (``MAX_TIME``, ``MAX_FLOAT``, ``MAX_INT``), strings ``printable``."""
    if isinstance(text, str):
        if len(text) > MAX_SNAPSHOT_BYTES:
            raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
        text = text.encode(errors="surrogatepass")  # a lone surrogate is then bad UTF-8 to json.loads
    elif not isinstance(text, (bytes, bytearray)):
        raise ValueError(f"expected JSON text, not {brief(text)}")
    plain, version = upgraded(parse(text))
    HOSTS.by_pid = {} if version >= 3 else None
    try:
        snap = decoder(Snapshot)(with_evidence(plain))
    finally:
        HOSTS.by_pid = None
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap
