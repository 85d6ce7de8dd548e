"""A snapshot as its changes from another (docs/recording.md, "Deltas"): ``delta_json`` writes what differs from a
base snapshot, ``snapshot_from_delta`` reads it back onto that base, checking every value that changed as the
decoder checks a whole snapshot's and reusing every object that did not change.

A delta adds no more values than it holds (an item of the base used once at most), so a snapshot read from one
stays within twice what one snapshot may be.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import re
import types
import typing
from collections.abc import Callable, Mapping

from gputop.codec.bounds import MAX_FLOAT, MAX_INT, MAX_TIME, TEXT_FORMS, TEXT_LIMITS, TIME_FIELDS, brief, parse
from gputop.codec.decode import (
    HOSTS,
    IMPLAUSIBLE,
    Decoder,
    decoder,
    field_decoders,
    fields_of,
    fields_out_of_range,
    implausible_reasons,
    parts_exceed,
)
from gputop.codec.encode import HOST_FIELDS, to_plain
from gputop.codec.upgrade import V1_NOT_RECORDED
from gputop.frozen import immutable
from gputop.model import HostProcess, Snapshot, frozen_reasons
from gputop.plausible import AT_MOST, RANGES

_FIELD_DATA, _FIELD_OBJECT, _FIELD_OBJECTS, _FIELD_NUMBER = 0, 1, 2, 3
"""How a delta writes a field that changed: its value whole; a dataclass as its own changed fields; a tuple of
dataclasses item by item; a number whole (checked in line when it is one, by its decoder otherwise)."""


@immutable
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
    fields: dict[str, tuple[int, int, Decoder, type | None, float, float, bool]]
    """By name: position, kind, decoder, dataclass, and for a number the range its decoder accepts and whether it
    is a float field (which takes an int too: JSON keeps ``61`` an int) or an int field."""
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
    ranges: dict[str, tuple[float, float, bool]] = {}
    decoders = dict(field_decoders(cls))
    for name, hint in fields_of(cls):
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
            epoch = inner[0] is float and name in TIME_FIELDS
            low, high = (
                (-MAX_INT, MAX_INT) if inner[0] is int else (0.0, MAX_TIME) if epoch else (-MAX_FLOAT, MAX_FLOAT)
            )
            plausible = RANGES.get(cls, {}).get(name)
            if plausible is not None:  # checked in line within it; its decoder says what a value outside it is
                low, high = max(low, plausible[0]), min(high, plausible[1])
            ranges[name] = (low, high, inner[0] is float)
        names.append(name)
        kinds.append(kind)
        classes.append(sub)
        if len(inner) == 1 and (inner[0] in (int, str, float, bool) or typing.get_origin(inner[0]) is typing.Literal):
            scalars.append(name)
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
        build=_builder(cls, names),
        key=first,
        fields={
            name: (i, kind, decoders[name], sub, *ranges.get(name, (0.0, 0.0, False)))
            for i, (name, kind, sub) in enumerate(zip(names, kinds, classes, strict=True))
        },
        limits=tuple((names.index(name), name, limit) for name, limit in TEXT_LIMITS.get(cls, {}).items()),
        forms=tuple((names.index(name), name, form) for name, form in TEXT_FORMS.get(cls, {}).items()),
        ranged=cls in RANGES,
        parts=tuple((names.index(part), names.index(whole)) for part, whole in AT_MOST.get(cls, {}).items()),
    )


def _builder(cls: type, names: list[str]) -> Callable[[list[object]], object]:
    """A function that makes an instance of the slotted dataclass ``cls`` with the field values given in order,
    without its ``__init__`` (which checks nothing the decoders have not: it only stores them).

    Straight-line code, one slot store per field. The stores go to an instance of a plain class with the very same
    slots, which Python then makes a ``cls`` (its ``__class__`` assigned, which Python allows between classes of
    one layout and checks): a frozen class's own slot descriptors take four times as long. Where Python refuses
    the assignment, or a value stored does not read back, each is stored through ``cls``'s descriptors instead."""
    twin = type(f"{cls.__name__}Values", (), {"__slots__": tuple(names)})
    made: object = object.__new__(twin)
    marks = [object() for _ in names]
    for name, mark in zip(names, marks, strict=True):
        setattr(made, name, mark)
    try:
        made.__class__ = cls
        same = all(getattr(made, name) is mark for name, mark in zip(names, marks, strict=True))
    except TypeError:
        same = False
    if not same:
        setters = {f"set{i}": getattr(cls, name).__set__ for i, name in enumerate(names)}
        source = "def build(values):\n    made = new(cls)\n"
        source += "".join(f"    set{i}(made, values[{i}])\n" for i in range(len(names)))
        source += "    return made\n"
        scope: dict[str, object] = {"new": object.__new__, "cls": cls, **setters}
    else:
        source = "def build(values):\n    made = new(twin)\n"
        source += "".join(f"    made.{name} = values[{i}]\n" for i, name in enumerate(names))
        source += "    made.__class__ = cls\n    return made\n"
        scope = {"new": object.__new__, "cls": cls, "twin": twin}
    exec(compile(source, f"<gputop.codec build {cls.__name__}>", "exec"), scope)
    return typing.cast("Callable[[list[object]], object]", scope["build"])


def delta_json(snap: Snapshot, base: Snapshot) -> bytes:
    """``snap`` as its changes from ``base`` (docs/recording.md, "Deltas"), compact JSON (UTF-8), which
    ``snapshot_from_delta`` turns back into ``snap`` given ``base``."""
    return json.dumps(delta_value(snap, base), separators=(",", ":"), ensure_ascii=False).encode()


Fields = set[tuple[type, str]]
"""Fields of the model by class and name."""


def delta_value(
    snap: Snapshot, base: Snapshot, numbers: Fields | bool = False, seen: Fields | None = None
) -> dict[str, object]:
    """``delta_json``'s JSON value, before it is written out, the fields that changed added to ``seen``. With
    ``numbers``, an object that changed is written with every number it holds of these fields (True: of any),
    changed or not, as the layout of the deltas after it (``delta_as``).
    """
    return _object_delta(snap, base, {host.pid: host for host in snap.host_processes}, numbers, seen)


def delta_as(
    layout: dict[str, object], snap: Snapshot, base: Snapshot, seen: Fields | None = None
) -> dict[str, object] | None:
    """``snap``'s changes from ``base`` laid out as ``layout`` (another delta from ``base``, as JSON reads it): the
    same fields and items in the same order, a field that ``snap`` did not change written with ``base``'s value,
    so that only the numbers differ from ``layout``'s; None where that cannot be (a field or an item that
    ``layout`` lacks, or one it has that cannot be written as unchanged)."""
    hosts = {host.pid: host for host in snap.host_processes}
    delta = _object_delta(snap, base, hosts, False, seen)
    return typing.cast("dict[str, object] | None", _as_layout(delta, layout, base, hosts))


_MISSING = object()


def _as_layout(delta: object, layout: object, old: object, hosts: dict[int, HostProcess]) -> object:
    """``delta`` (``_MISSING``: unchanged from ``old``) of a field or item that ``layout`` holds as ``layout``
    holds it, or None."""
    if type(layout) is dict and dataclasses.is_dataclass(old):
        changed = delta if type(delta) is dict else {} if delta is _MISSING else None
        if changed is None or not changed.keys() <= layout.keys():
            return None
        shape = _shape(type(old))
        out: dict[str, object] = {}
        for name, inner in layout.items():
            field = shape.fields.get(name)
            if field is None:
                return None
            kind = field[1]
            value = getattr(old, name)
            if kind == _FIELD_OBJECT and type(inner) is dict and value is not None:
                got = _as_layout(changed.get(name, _MISSING), inner, value, hosts)
            elif kind == _FIELD_OBJECTS and type(inner) is list:
                got = _items_as_layout(changed.get(name, _MISSING), inner, value, hosts)
            elif name in changed:
                got = changed[name]
            elif (shape.cls, name) in HOST_FIELDS:
                return None  # a PID names the new snapshot's host process, which may not be this one
            else:
                got = _whole(value, hosts)
            if got is None and inner is not None:
                return None
            out[name] = got
        return out
    return None


def _items_as_layout(
    delta: object, layout: list[object], old: tuple[object, ...], hosts: dict[int, HostProcess]
) -> object:
    entries = [*range(len(old))] if delta is _MISSING else delta
    if type(entries) is not list or len(entries) != len(layout):
        return None
    out: list[object] = []
    for entry, inner in zip(entries, layout, strict=True):
        if type(inner) is list and len(inner) == 2:
            i, changes = (entry, _MISSING) if type(entry) is int else entry if type(entry) is list else (None, None)
            if type(i) is not int or not 0 <= i < len(old):
                return None
            got = _as_layout(changes, inner[1], old[i], hosts)
            if got is None:
                return None
            out.append([i, got])
        elif type(inner) is type(entry):
            out.append(entry)
        else:
            return None
    return out


def _object_delta(
    new: object, old: object, hosts: dict[int, HostProcess], numbers: Fields | bool, seen: Fields | None
) -> dict[str, object]:
    shape = _shape(type(new))
    changed: dict[str, object] = {}
    for name, kind, _sub, a, b in zip(
        shape.names, shape.kinds, shape.classes, shape.values(new), shape.values(old), strict=True
    ):
        if a is b or a == b:
            continue
        if kind == _FIELD_OBJECT and a is not None and b is not None:
            changed[name] = _object_delta(a, b, hosts, numbers, seen)
        elif kind == _FIELD_OBJECTS:
            # The shape's kind says these are tuples of dataclasses on both sides.
            changed[name] = _items_delta(
                typing.cast("tuple[object, ...]", a), typing.cast("tuple[object, ...]", b), hosts, numbers, seen
            )
        else:
            changed[name] = _whole(a, hosts, (type(new), name) in HOST_FIELDS)
    if seen is not None:
        seen.update((shape.cls, name) for name in changed)
    if numbers and changed:  # the numbers of an object that changed, as the layout of the rows after it
        values = dict(zip(shape.names, shape.values(new), strict=True))
        return {
            name: changed[name] if name in changed else values[name]
            for name, kind in zip(shape.names, shape.kinds, strict=True)
            if name in changed
            or (
                kind == _FIELD_NUMBER and values[name] is not None and (numbers is True or (shape.cls, name) in numbers)
            )
        }
    return changed


def _items_delta(
    new: tuple[object, ...],
    old: tuple[object, ...],
    hosts: dict[int, HostProcess],
    numbers: Fields | bool = False,
    seen: Fields | None = None,
) -> list[object]:
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
            out.append([i, _object_delta(item, old[i], hosts, numbers, seen)])
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
                else to_plain(v)
            )
            for name, kind, v in zip(shape.names, shape.kinds, shape.values(value), strict=True)
        }
    return to_plain(value)


def snapshot_from_delta(text: bytes, base: Snapshot, unwritten: frozenset[tuple[type, str]] = frozenset()) -> Snapshot:
    """The snapshot whose ``delta_json`` from ``base`` is ``text``. Raises ``ValueError``, and nothing else, on
    anything else; every value that changed is checked as ``snapshot_from_json`` checks it, and what did not
    change is ``base``'s own (an item of a tuple used once at most, so that a delta adds no more values than it
    holds)."""
    if not isinstance(text, (bytes, bytearray)):
        raise ValueError(f"expected JSON text, not {brief(text)}")
    return snapshot_from_delta_value(parse(text), base, unwritten)


def snapshot_from_delta_value(
    delta: object, base: Snapshot, unwritten: frozenset[tuple[type, str]] = frozenset()
) -> Snapshot:
    """``snapshot_from_delta`` of the JSON value ``delta`` (bounded as ``parse`` bounds it); ``unwritten``: the
    fields added later than the writer of ``base`` knew, which stay not recorded."""
    if type(delta) is not dict:
        raise ValueError(f"expected an object for a snapshot's changes, not {brief(delta)}")
    snap = _patch_snapshot(delta, base, _later_by_class(unwritten))
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap


Later = dict[type, list[str]]
"""The fields its whole snapshot's writer did not write (``gputop.codec.decode.snapshot_unwritten``), by class."""


def _later_by_class(unwritten: frozenset[tuple[type, str]]) -> Later:
    later: Later = {}
    for cls, name in unwritten:
        later.setdefault(cls, []).append(name)
    return later


def _patch_snapshot(delta: dict[str, object], base: Snapshot, later: Later) -> object:
    shape = _shape(Snapshot)
    hosts = base.host_processes
    if "host_processes" in delta:
        try:
            hosts = typing.cast(
                "tuple[HostProcess, ...]", _patch_items(delta["host_processes"], hosts, HostProcess, later)
            )
        except ValueError as exc:
            raise ValueError(f"Snapshot.host_processes: {exc}") from None
    HOSTS.by_pid = {host.pid: host for host in hosts}
    try:
        values = list(shape.values(base))
        values[shape.position["host_processes"]] = hosts
        snap = _patch_fields(delta, values, shape, later, skip="host_processes")
    finally:
        HOSTS.by_pid = None
    return snap


def _patch_object(delta: object, old: object, cls: type, later: Later) -> object:
    if type(delta) is not dict:
        raise ValueError(f"expected an object for {cls.__name__}'s changes, not {brief(delta)}")
    shape = _SHAPES.get(cls) or _shape(cls)
    return _patch_fields(delta, list(shape.values(old)), shape, later)


def _patch_fields(
    delta: dict[str, object], values: list[object], shape: _Shape, later: Later, skip: str = ""
) -> object:
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
            i, kind, decode, sub, low, high, floating = field
            if kind == _FIELD_NUMBER:
                # type(), not isinstance: JSON's true is an int to Python. NaN fails both comparisons.
                if ((floating and type(value) is float) or type(value) is int) and low <= value <= high:
                    values[i] = value
                else:  # None where allowed, IMPLAUSIBLE out of its range, else the decoder's error
                    decoded = values[i] = decode(value)
                    marked = marked or decoded is IMPLAUSIBLE
            elif kind == _FIELD_DATA or value is None or values[i] is None:
                values[i] = decode(value)
            elif kind == _FIELD_OBJECT:
                if type(value) is not dict:
                    raise ValueError(
                        f"expected an object for {typing.cast('type', sub).__name__}'s changes, not {brief(value)}"
                    )
                inner = _SHAPES.get(typing.cast("type", sub)) or _shape(typing.cast("type", sub))
                values[i] = _patch_fields(value, list(inner.values(values[i])), inner, later)
            else:
                values[i] = _patch_items(value, values[i], typing.cast("type", sub), later)
    except ValueError as exc:
        raise ValueError(f"{shape.cls.__name__}.{name}: {exc}") from None
    # Fields the recording's writer did not know (not written in its whole snapshot) are not recorded; a delta
    # that rewrites the reasons cannot name them either, so they stay not recorded.
    unknown = later.get(shape.cls) if later and "unavailable" in delta else None
    if unknown:
        where = shape.position.get("unavailable")
        if where is not None:
            now = typing.cast("Mapping[str, str]", values[where] or {})
            if any(k not in now for k in unknown):
                values[where] = frozen_reasons({**dict.fromkeys(unknown, V1_NOT_RECORDED), **now})
    for i, field_name, limit in shape.limits:
        text = values[i]
        if isinstance(text, str) and len(text) > limit:
            raise ValueError(f"{shape.cls.__name__}.{field_name}: over {limit} characters")
    for i, field_name, form in shape.forms:
        text = values[i]
        if isinstance(text, str) and not form.fullmatch(text):
            raise ValueError(f"{shape.cls.__name__}.{field_name}: not of the form {form.pattern}")
    if marked or (shape.parts and parts_exceed(values.__getitem__, shape.parts)):
        position = shape.position

        def value_of(name: str) -> object:
            return values[position[name]]

        bad = fields_out_of_range(shape.cls, value_of, marked, shape.names)
        if bad:
            where = position.get("unavailable")
            reasons = implausible_reasons(shape.cls, bad, value_of, None if where is None else values[where])
            assert where is not None  # a class without reasons is refused above
            values[where] = reasons
            for name in bad:
                values[position[name]] = None
    return shape.build(values)


def _patch_items(delta: object, old: object, cls: type, later: Later) -> tuple[object, ...]:
    if type(delta) is not list:
        raise ValueError(f"expected a list, not {brief(delta)}")
    if type(old) is not tuple:
        raise ValueError("changes to a list the snapshot before did not have")
    whole = decoder(cls)
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
            raise ValueError(f"expected an item, or an unused index of the list before, not {brief(i)}")
        used.add(i)
        items.append(old[i] if changes is None else _patch_object(changes, old[i], cls, later))
    return tuple(items)
