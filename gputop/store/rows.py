"""The rows of a recording's ``snapshots`` table: how each holds its snapshot, and the format version they make.

A row is a whole snapshot (its ``snapshot_json``, deflated with the recording's preset dictionary) or, from format
4, its changes from the whole snapshot some rows before it (``DELTA``, that distance, and its ``delta_json``
deflated with the whole snapshot's text): a whole snapshot every ``KEYFRAME_EVERY`` rows; from format 5 such a
row laid out as the first one after its whole snapshot holds its numbers alone (``NUMBERS``). ``RowWriter`` makes the
rows of a new recording; ``RowReader`` reads those of any format, in order or by row (docs/recording.md,
"Encoding of snapshots.data" and "Deltas"). The snapshots' JSON and its strict decoder are ``gputop.codec``'s.
"""

from __future__ import annotations

import dataclasses
import json
import typing
import zlib
from collections.abc import Callable

from gputop.codec import (
    MAX_SNAPSHOT_BYTES,
    decoded_bytes,
    snapshot_from_delta,
    snapshot_from_json,
    snapshot_json,
    snapshot_unwritten,
)
from gputop.codec.bounds import brief, parse
from gputop.codec.delta import Fields, delta_as, delta_value, snapshot_from_delta_value
from gputop.frozen import immutable
from gputop.model import Snapshot
from gputop.store.numbers import Bases, number_slots, numbers_like, pack, unpack

SCHEMA_VERSION = 5
"""The file format (``PRAGMA user_version``): 2 since process rows hold their host process, 3 since a host that is
also in ``host_processes`` is written as its PID (up to 3, the codec's format of its snapshots,
``gputop.codec.FORMAT``), 4 since a row holds either a whole snapshot or its changes from one
(``KEYFRAME_EVERY``), 5 since a row of changes laid out as the first one after its whole snapshot holds only
its numbers (``NUMBERS``). A reader reads 1 to 5; an older one refuses a newer file as a whole ("upgrade gputop")
instead of skipping every row. A change to the tables would change it too; none has so far."""
ENCODING = "zlib+json"
"""``meta.encoding``: how a row holds its snapshot."""
KEYFRAME_EVERY = 60
"""A whole snapshot every this many rows, the rows between holding their changes from it (at most
``MAX_CHAIN_ROWS``): a row is read by decoding at most one whole snapshot and its own changes, and a damaged row
loses only itself, unless it is a whole snapshot."""
MAX_CHAIN_ROWS = 255
"""The most rows a delta may follow its whole snapshot by: the distance is one byte of the row."""
DELTA = b"D"
"""The first byte of a recording row that holds a snapshot as its changes from a whole snapshot some rows before it
(``delta_json``); a whole snapshot's row is deflated JSON, whose first byte is zlib's (0x78). A delta adds no more
values than it holds, so a snapshot read from one stays within twice what one snapshot may be."""
NUMBERS = b"N"
"""From format 5, the first byte of a delta row laid out as the first delta after its whole snapshot (the same
fields and items, only numbers differing: ``delta_as``), which holds only those numbers (``gputop.store.numbers``),
deflated with the first delta's numbers packed against themselves as the preset dictionary."""


def compress(text: bytes, zdict: bytes, level: int = 6) -> bytes:
    """``text`` deflated (zlib, ``level``), with ``zdict`` as the preset dictionary when there is one."""
    packer = zlib.compressobj(level, zdict=zdict) if zdict else zlib.compressobj(level)
    return packer.compress(text) + packer.flush()


def inflate(data: object, zdict: bytes = b"") -> bytes:
    """What ``compress`` deflated. Raises ``ValueError``, and nothing else, on bad data, after inflating at most
    ``MAX_SNAPSHOT_BYTES`` of it (a zlib bomb inflates a thousandfold)."""
    if not isinstance(data, bytes):
        raise ValueError(f"expected deflated bytes, not {brief(data)}")
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


def encode_snapshot(snap: Snapshot, zdict: bytes = b"") -> bytes:
    """A row of formats 1 to 3, and a whole snapshot's of format 4: the snapshot's JSON, deflated with ``zdict``
    as the preset dictionary (the recording's first snapshot, so field names and steady values cost little)."""
    return compress(snapshot_json(snap), zdict)


def decode_snapshot(data: bytes, zdict: bytes = b"") -> Snapshot:
    """The snapshot ``encode_snapshot`` encoded, equal to it with ``==``. Raises ``ValueError``, and nothing else,
    on bad data, after inflating at most ``MAX_SNAPSHOT_BYTES`` of it (a zlib bomb inflates a thousandfold)."""
    return snapshot_from_json(inflate(data, zdict))


@immutable
class Keyframe:
    """A whole snapshot of a recording as read, with what the delta rows after it need: its JSON text and that of
    the delta right after it (``reference``, once read), their preset dictionary (``delta_dictionary``)."""

    snapshot: Snapshot
    text: bytes
    rowid: int
    reference: bytes | None = None
    weight: int = 0
    """At most the memory its snapshot holds (``decoded_bytes``)."""
    layout: Layout | None = None
    """The first delta's JSON value and numbers, once a row of numbers needed them."""
    unwritten: frozenset[tuple[type, str]] = frozenset()
    """The fields its writer did not know (``snapshot_unwritten``), which the rows after it keep not recorded."""


@immutable
class Layout:
    """The first delta after a whole snapshot as the rows of numbers after it are laid out: its JSON value, its
    numbers in order and where each is in that value, and their preset dictionary."""

    value: dict[str, object]
    numbers: list[int | float]
    slots: list[tuple[dict[str, object] | list[object], str | int]]
    """The object or list of ``value`` that holds each number, and its key or index there."""
    zdict: bytes
    bases: Bases = dataclasses.field(default_factory=Bases)
    """``unpack``'s cache."""

    @staticmethod
    def of(text: bytes) -> Layout | None:
        """The layout of a delta's JSON text (None where it is not an object or one of its numbers cannot be
        packed)."""
        value = parse(text)
        slots = number_slots(value)
        numbers = [typing.cast("int | float", holder[key]) for holder, key in slots]  # type: ignore[index]
        packed = pack(numbers, numbers)
        if packed is None or type(value) is not dict:
            return None
        return Layout(value, numbers, slots, packed)

    def filled(self, numbers: list[int | float]) -> dict[str, object]:
        """The layout's value with ``numbers`` in place of its own (the value is reused: one row's at a time)."""
        for (holder, key), number in zip(self.slots, numbers, strict=True):
            holder[key] = number  # type: ignore[index]
        return self.value


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


def encode_numbers(numbers: list[int | float], layout: Layout, behind: int) -> bytes | None:
    """A row of format 5 ``behind`` rows after its whole snapshot (2 to ``MAX_CHAIN_ROWS``) holding a delta laid
    out as ``layout``, whose ``numbers`` these are: ``NUMBERS``, the distance, the numbers packed and deflated.
    None where one cannot be packed."""
    if not 2 <= behind <= MAX_CHAIN_ROWS:
        raise ValueError(f"a row of numbers {behind} rows after its whole snapshot")
    packed = pack(numbers, layout.numbers)
    return None if packed is None else NUMBERS + bytes([behind]) + compress(packed, layout.zdict, 9)


def row_behind(data: object) -> int:
    """How many rows before this one its whole snapshot is: 0 for a whole snapshot (or data that is none)."""
    if isinstance(data, bytes) and data[:1] in (DELTA, NUMBERS) and len(data) > 1:
        return data[1]
    return 0


def decode_row(
    data: object, zdict: bytes, rowid: int, key: Keyframe | None, weigh: bool = True
) -> tuple[Snapshot, Keyframe, int]:
    """The snapshot of a format-4 row ``rowid``, the whole snapshot the rows after it change, and at most how much
    memory the snapshot holds besides that whole snapshot's (``decoded_bytes``; 0 for a whole one, and without
    ``weigh``, where no one counts it, 0 for any): the row's own
    if it is one (decoded with the recording's preset dictionary ``zdict``), else ``key``, which a delta needs,
    with its ``reference`` once that is read. Raises ``ValueError``, and nothing else, on bad data, or a delta
    whose whole snapshot (or, after the first, the first delta) is not at hand. A delta's snapshot shares the
    values it does not change with its whole snapshot, and so keeps it alive."""
    behind = row_behind(data)
    if not behind:
        text = inflate(data, zdict)
        snap, unwritten = snapshot_unwritten(text)
        key = Keyframe(snap, text, rowid, weight=decoded_bytes(text), unwritten=unwritten)
        return key.snapshot, key, 0
    if key is None or key.rowid != rowid - behind:
        raise ValueError(f"the changes from row {rowid - behind}, which cannot be read")
    if behind > 1 and key.reference is None:
        raise ValueError(f"the changes from row {rowid - behind}, whose first changes cannot be read")
    assert isinstance(data, bytes)
    if data[:1] == NUMBERS and behind > 1:
        return _decode_numbers(data, key, weigh)
    text = inflate(data[2:], delta_dictionary(key.text, key.reference if behind > 1 else None))
    snap = snapshot_from_delta(text, key.snapshot, key.unwritten)
    own = decoded_bytes(text) if weigh else 0
    return snap, dataclasses.replace(key, reference=text) if behind == 1 else key, own


def _decode_numbers(data: bytes, key: Keyframe, weigh: bool) -> tuple[Snapshot, Keyframe, int]:
    """``decode_row`` of a row of numbers: the first delta's value with the row's numbers in their places, decoded
    as that delta is. Its memory is counted as the first delta's, which has as many values."""
    reference = key.reference
    assert reference is not None
    if key.layout is None:
        layout = Layout.of(reference)
        if layout is None:
            raise ValueError("the first changes after the whole snapshot hold a number no row holds")
        key = dataclasses.replace(key, layout=layout)
    assert key.layout is not None
    numbers = unpack(inflate(data[2:], key.layout.zdict), key.layout.numbers, key.layout.bases)
    snap = snapshot_from_delta_value(key.layout.filled(numbers), key.snapshot, key.unwritten)
    return snap, key, decoded_bytes(reference) if weigh else 0


@immutable
class WeighedSnapshot:
    """A snapshot as read, with at most how much memory it holds (``gputop.codec.decoded_bytes``): ``own_bytes``
    of its own, and the ``whole_bytes`` of the whole snapshot in row ``whole_row``, whose values it shares and so
    keeps alive (a whole snapshot is its own: ``own_bytes`` 0, ``whole_row`` its row)."""

    snapshot: Snapshot
    own_bytes: int
    whole_row: int
    whole_bytes: int


class RowWriter:
    """The rows of a new recording, one snapshot after another: a whole snapshot every ``KEYFRAME_EVERY`` rows,
    the first one's JSON the recording's preset dictionary, and the rows between their changes from it."""

    def __init__(self) -> None:
        self._zdict: bytes | None = None
        self._key: Snapshot | None = None
        """The last whole snapshot written, its JSON text, the text of the delta after it, and the rows since."""
        self._key_text = b""
        self._reference: bytes | None = None
        self._layout: Layout | None = None
        self._behind = 0
        self._changing: Fields | bool = True
        """The fields that changed in the last whole snapshot's rows (True before there were any): the numbers of
        an object that the first delta after a whole snapshot writes, changed or not, as its layout."""
        self._changed: Fields = set()

    def row(self, snap: Snapshot) -> tuple[bytes, bytes | None]:
        """The row of ``snap``: its changes from the last whole snapshot, or whole every ``KEYFRAME_EVERY`` rows;
        and the recording's preset dictionary where this row is the first, which sets it (kept in ``meta.zdict``),
        else None."""
        self._behind += 1
        if self._key is not None and self._behind < KEYFRAME_EVERY:
            if self._layout is not None:
                laid = delta_as(self._layout.value, snap, self._key, self._changed)
                numbers: list[int | float] = []
                if laid is not None and numbers_like(laid, self._layout.value, numbers):
                    data = encode_numbers(numbers, self._layout, self._behind)
                    if data is not None:
                        return data, None
            value = delta_value(snap, self._key, self._changing if self._behind == 1 else False, self._changed)
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
            data = encode_row(text, delta_dictionary(self._key_text, self._reference), self._behind)
            if self._behind == 1:
                self._reference = text
                self._layout = Layout.of(text)
            return data, None
        text = snapshot_json(snap)
        first = None
        if self._zdict is None:
            self._zdict = first = text
        if self._key is not None:
            self._changing, self._changed = self._changed, set()
        self._key, self._key_text, self._reference, self._layout, self._behind = snap, text, None, None, 0
        return encode_row(text, self._zdict), first


class RowReader:
    """The snapshots of a recording's rows, as its format version lays them out: up to 3 every row a whole
    snapshot; from 4 a whole snapshot or its changes from one (``decode_row``), the last whole snapshot read kept
    for the rows after it. Each method raises ``ValueError``, and nothing else of its own, on a row that does not
    decode."""

    def __init__(self, version: int) -> None:
        self._chained = version >= 4
        self._key: Keyframe | None = None

    def read_next(self, data: object, zdict: bytes, rowid: int) -> Snapshot:
        """The snapshot of row ``rowid``, holding ``data``, read after the rows before it (as a pass over the file
        reads them): a delta whose whole snapshot was not the last read does not decode."""
        if not self._chained:
            return snapshot_from_json(inflate(data, zdict))
        snap, self._key, _ = decode_row(data, zdict, rowid, self._key, weigh=False)
        return snap

    def read_at(self, data: object, zdict: bytes, rowid: int, fetch: Callable[[int], object]) -> WeighedSnapshot:
        """The snapshot of row ``rowid``, holding ``data``, read in any order (a replay's jump): a delta whose whole
        snapshot (or, after the first delta, that delta) was not the last read has them read first, ``fetch``
        giving the data of a row (None where there is none)."""
        if not self._chained:
            text = inflate(data, zdict)
            return WeighedSnapshot(snapshot_from_json(text), 0, rowid, decoded_bytes(text))
        behind = row_behind(data)
        key = self._key
        if behind and (key is None or key.rowid != rowid - behind or (behind > 1 and key.reference is None)):
            # Its whole snapshot, and the first changes after it, which the later ones are deflated with.
            key = self._key = None
            for back in range(rowid - behind, rowid - behind + min(behind, 2)):
                _, key, _ = decode_row(fetch(back), zdict, back, key)
            self._key = key
        snap, self._key, own = decode_row(data, zdict, rowid, key)
        return WeighedSnapshot(snap, own, self._key.rowid, self._key.weight)
