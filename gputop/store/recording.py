"""A recording: snapshots in an SQLite file, written in batches, read back as the same frozen dataclasses.

The format is described in docs/recording.md. In short: WAL mode, ``PRAGMA user_version`` is the schema version,
a ``meta`` table of JSON values, and a ``snapshots`` table of ``(time REAL, data BLOB)`` where ``data`` is the
deflated (zlib) JSON of the whole snapshot, every dataclass an object keyed by field name, with the first
snapshot's JSON (``meta.zdict``) as the preset dictionary.

A recording may have been written by someone else, and a snapshot's JSON may come from another machine: reading
checks the tables, bounds every row and every inflation (``MAX_SNAPSHOT_BYTES``), and the decoder checks the type
and range of every value and makes every string printable ("Reading files from someone else" in the docs).
Recordings are created private to their owner: they hold every GPU process's command line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
import types
import typing
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from gputop import __version__
from gputop.files import PRIVATE, create_new
from gputop.model import Snapshot, frozen_reasons
from gputop.sanitize import printable

SCHEMA_VERSION = 1
TABLES = {
    "meta": "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "snapshots": "CREATE TABLE snapshots (time REAL NOT NULL, data BLOB NOT NULL)",
}
"""The tables of format 1, as the recorder creates them: a reader finds these exact definitions in
``sqlite_master``, or the file is not one of gputop's."""
FORMAT = "gputop-recording"
ENCODING = "zlib+json"
DEFAULT_FLUSH_EVERY_S = 2.0
_CHUNK = 256


class RecordingError(Exception):
    """A recording that cannot be written or read: the message is one line, fit to show to the user."""


# -- encoding ---------------------------------------------------------------------------------------------------

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
_NOT_TOKENS = bytes(sorted(set(range(256)) - set(b",:[{")))


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
    """The whole snapshot as compact JSON (UTF-8): every dataclass an object keyed by field name."""
    return json.dumps(_to_plain(snap), separators=(",", ":"), ensure_ascii=False).encode()


def encode_snapshot(snap: Snapshot, zdict: bytes = b"") -> bytes:
    """The compact, lossless encoding of a snapshot stored in ``snapshots.data``: its JSON, deflated with ``zdict``
    as the preset dictionary (the recording's first snapshot, so field names and steady values cost little)."""
    return _compress(snapshot_json(snap), zdict)


def _compress(text: bytes, zdict: bytes) -> bytes:
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
    snap = _decoder(Snapshot)(plain)
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


# -- writing ----------------------------------------------------------------------------------------------------


class Recorder:
    """Appends snapshots to a new recording file, committing them in batches every ``flush_every_s``.

    A process killed with SIGKILL loses at most the snapshots appended since the last commit. Any thread may
    append (a sampler's callback, say); one lock serialises them. ``close`` writes ``meta.ended``, so a reader
    can tell a finished recording from one still being written or cut off.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        interval_s: float | None = None,
        *,
        hostname: str | None = None,
        started: float | None = None,
        flush_every_s: float = DEFAULT_FLUSH_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.flush_every_s = flush_every_s
        self._clock = clock
        self._pending: list[tuple[float, bytes]] = []
        self._zdict: bytes | None = None
        self._pending_meta: list[tuple[str, str]] = []
        self.written = 0
        self._lock = threading.Lock()
        self._closed = False
        _check_writable(self.path)
        self._db = _create(self.path)
        try:
            # 16 KiB pages fit a dozen snapshots of an 8-GPU machine with little slack (docs/recording.md).
            self._db.execute("PRAGMA page_size=16384")
            self._db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode, NORMAL survives a killed process (not a power cut) and spares an fsync per commit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("BEGIN")
            for definition in TABLES.values():
                self._db.execute(definition)
            meta = {
                "format": FORMAT,
                "encoding": ENCODING,
                "gputop_version": __version__,
                "hostname": hostname if hostname is not None else socket.gethostname(),
                "started": started if started is not None else time.time(),
                "interval_s": interval_s,
            }
            self._db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._db.close()
            raise RecordingError(f"cannot write {self.path}: {exc}") from None
        self._last_flush = clock()

    def append(self, snap: Snapshot) -> None:
        """Add a snapshot; commits the batch when ``flush_every_s`` has passed since the last commit."""
        text = snapshot_json(snap)
        with self._lock:
            if self._closed:
                return
            if self._zdict is None:
                self._zdict = text
                self._pending_meta.append(("zdict", json.dumps(text.decode())))
            self._pending.append((snap.time, _compress(text, self._zdict)))
        self.tick()

    def tick(self) -> None:
        """Commit the batch if it is due (call it now and then when no snapshots come)."""
        if self._pending and self._clock() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        """Commit every snapshot appended so far."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        self._last_flush = self._clock()
        if not self._pending:
            return
        try:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", self._pending_meta)
            self._db.executemany("INSERT INTO snapshots (time, data) VALUES (?, ?)", self._pending)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")  # the batch stays pending: the next flush tries again
            raise RecordingError(f"cannot write {self.path}: {exc}") from None
        self.written += len(self._pending)
        self._pending.clear()
        self._pending_meta.clear()

    def close(self) -> None:
        """Commit what is pending, mark the recording ended and close the file (folding the WAL back into it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._pending_meta.append(("ended", json.dumps(time.time())))
                self._flush_all()
                self._leave_wal()
            finally:
                self._db.close()

    def _leave_wal(self) -> None:
        """Finished, the file leaves WAL mode: it is then one self-contained file, and readers leave no -wal and
        -shm files beside it. A reader still attached (a replay of the live file) keeps it in WAL mode, which
        reads just as well."""
        try:
            self._db.execute("PRAGMA busy_timeout=100")
            self._db.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.OperationalError:
            pass

    def _flush_all(self) -> None:
        """Commit the pending snapshots and meta rows, even when there are no snapshots."""
        if self._pending:
            self._flush()
            return
        try:
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", self._pending_meta)
        except sqlite3.Error as exc:
            raise RecordingError(f"cannot write {self.path}: {exc}") from None
        self._pending_meta.clear()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_writable(path: Path) -> None:
    """Say plainly why the file cannot be created, where that can be told before trying."""
    parent = path.parent
    if not parent.is_dir():
        raise RecordingError(f"cannot create {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RecordingError(f"cannot create {path}: directory {parent} is not writable")


def _create(path: Path) -> sqlite3.Connection:
    """A new, empty file at ``path``, private to its owner, opened by SQLite.

    A recording holds every GPU process's command line, and those carry secrets (``--api-key=...``). The file is
    created here, exclusively and never through a symlink another user planted (``create_new``), mode 600; SQLite
    gives the -wal and -shm files it makes beside it the same mode. SQLite then opens it by name without the right
    to create it (``mode=rw``): only someone allowed to delete our new file could swap another in between.
    """
    try:
        os.close(create_new(path, PRIVATE))
    except FileExistsError:
        raise RecordingError(f"{path} already exists: choose a new file") from None
    except OSError as exc:
        raise RecordingError(f"cannot create {path}: {exc.strerror or exc}") from None
    uri = f"{Path(os.path.abspath(path)).as_uri()}?mode=rw"
    try:
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise RecordingError(f"cannot create {path}: {exc}") from None


# -- reading ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordingInfo:
    """A recording's metadata (the ``meta`` table)."""

    path: str
    schema_version: int
    gputop_version: str | None
    hostname: str | None
    started: float | None
    interval_s: float | None
    ended: float | None = None
    """When the recorder closed the file; None while it is being written, or when its writer was killed."""


_ROW_OK = (
    f"typeof(time) = 'real' AND time BETWEEN 0 AND {MAX_TIME:.0f} "
    f"AND typeof(data) = 'blob' AND length(data) <= {MAX_SNAPSHOT_BYTES}"
)
"""A row that may hold a snapshot: a time, and data of a size a snapshot can have. Asked of SQLite before the data
is read (``typeof`` and a blob's ``length`` do not read it), so an oversized row costs nothing."""


class Recording:
    """An open recording: ``info`` and the snapshots, in the order they were recorded (time order).

    Iterating reads the file afresh, so a recording still being written shows the batches committed so far.
    A damaged file yields every snapshot that can still be read and sets ``damage`` to a one-line description;
    ``skipped`` counts the rows of the last pass (``snapshots`` or ``index``) that hold no snapshot it can read.
    """

    def __init__(
        self, db: sqlite3.Connection, info: RecordingInfo, cleanup: Callable[[], object] | None = None
    ) -> None:
        self._db = db
        self.info = info
        self.damage: str | None = None
        self.skipped = 0
        self.opened_damaged = False
        self._stopped: str | None = None
        self._cleanup = cleanup
        self._zdict: bytes | None = None

    def __iter__(self) -> Iterator[Snapshot]:
        return self.snapshots()

    def _start_pass(self) -> None:
        self._stopped = "the file is cut short" if self.opened_damaged else None
        self.skipped = 0
        self._describe()

    def _stop(self, why: str) -> None:
        self._stopped = why
        self._describe()

    def _skip(self) -> None:
        self.skipped += 1
        self._describe()

    def _describe(self) -> None:
        parts = [self._stopped] if self._stopped else []
        if self.skipped:
            rows = "row" if self.skipped == 1 else "rows"
            parts.append(f"skipped {self.skipped} snapshot {rows} that cannot be read")
        self.damage = f"{self.info.path} is damaged: {'; '.join(parts)}" if parts else None

    def snapshots(self) -> Iterator[Snapshot]:
        self._start_pass()
        last = 0
        limit = _CHUNK
        zdict = self._dictionary()
        while True:
            rows = 0
            try:
                # One row at a time from the cursor: a single snapshot's data is in memory at once.
                for rowid, data in self._db.execute(
                    f"SELECT rowid, CASE WHEN {_ROW_OK} THEN data END FROM snapshots "
                    "WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    (last, limit),
                ):
                    rows += 1
                    if rowid <= last:  # a damaged b-tree can lead back: stop rather than loop
                        self._stop(f"stopped reading after snapshot row {last}")
                        return
                    last = rowid
                    try:
                        snap = decode_snapshot(data, zdict)
                    except ValueError:
                        self._skip()
                        continue
                    yield snap
            except sqlite3.DatabaseError as exc:
                if limit == 1:
                    self._stop(f"stopped reading after snapshot row {last} ({exc})")
                    return
                limit = 1  # read on one row at a time up to the damage
                continue
            if not rows:
                return
            limit = _CHUNK

    def index(self) -> list[tuple[int, float]]:
        """``(rowid, time)`` of every snapshot row that can be reached, in recorded order, without decoding any:
        what a replay needs to lay out its timeline. A row without a time or with data no snapshot can have is
        left out and counted in ``skipped``. Reading stops at damage (``damage`` says so)."""
        self._start_pass()
        found: list[tuple[int, float]] = []
        last = 0
        while True:
            try:
                rows = self._db.execute(
                    f"SELECT rowid, time, {_ROW_OK} FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT 4096", (last,)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                rows = []
                try:
                    rows = self._db.execute(
                        f"SELECT rowid, time, {_ROW_OK} FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT 1",
                        (last,),
                    ).fetchall()
                except sqlite3.DatabaseError:
                    self._stop(f"stopped reading after snapshot row {last} ({exc})")
                    return found
            if not rows or rows[0][0] <= last:
                return found
            for rowid, at, ok in rows:
                if rowid <= last:
                    self._stop(f"stopped reading after snapshot row {last}")
                    return found
                last = rowid
                if ok:
                    found.append((rowid, at))
                else:
                    self._skip()

    def read(self, rowid: int) -> Snapshot:
        """The snapshot in row ``rowid`` (from ``index``). Raises ``RecordingError`` when it cannot be read."""
        try:
            row = self._db.execute(
                f"SELECT CASE WHEN {_ROW_OK} THEN data END FROM snapshots WHERE rowid = ?", (rowid,)
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{self.info.path} is damaged: cannot read snapshot row {rowid} ({exc})") from None
        if row is None:
            raise RecordingError(f"{self.info.path}: no snapshot row {rowid}")
        try:
            return decode_snapshot(row[0], self._dictionary())
        except ValueError as exc:
            raise RecordingError(f"{self.info.path} is damaged: snapshot row {rowid} does not decode ({exc})") from None

    def _dictionary(self) -> bytes:
        """The preset dictionary, written with the first batch (so read again until it is there). One that is not
        text of at most ``MAX_SNAPSHOT_BYTES`` is not used: no row decodes then, and each is counted skipped."""
        if self._zdict is None:
            try:
                row = self._db.execute(
                    "SELECT CASE WHEN typeof(value) = 'text' AND length(value) <= ? THEN value END "
                    "FROM meta WHERE key = 'zdict'",
                    (MAX_SNAPSHOT_BYTES,),
                ).fetchone()
            except sqlite3.DatabaseError:
                row = None
            if row is not None:
                text = _json_value(row[0])
                self._zdict = text.encode(errors="replace") if isinstance(text, str) else b""
        return self._zdict or b""

    def count(self) -> int:
        """How many snapshots are committed (damaged ones included)."""
        try:
            return self._db.execute("SELECT count(*) FROM snapshots").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{self.info.path} is damaged: {exc}") from None

    def close(self) -> None:
        self._db.close()
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_recording(path: str | os.PathLike[str]) -> Recording:
    """Open a recording for reading (never writes to it). Raises ``RecordingError`` when it cannot be read."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"no such file: {path}")
    if not path.is_file():
        raise RecordingError(f"not a file: {path}")
    try:
        with open(path, "rb") as f:
            header = f.read(16)
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror or exc}") from None
    if header != b"SQLite format 3\x00":
        raise RecordingError(f"not a gputop recording: {path}")
    db = _connect_read_only(path)
    try:
        info = _read_info(db, path)
    except _Damaged as damaged:
        db.close()
        return _salvage(path, damaged)
    except BaseException:
        db.close()
        raise
    return Recording(db, info)


class _Damaged(RecordingError):
    """SQLite found the file malformed before anything could be read (a truncated file, most often)."""


def _connect_read_only(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise RecordingError(f"cannot open {path}: {exc}") from None


def _salvage(path: Path, damaged: _Damaged) -> Recording:
    """Read a damaged file through a private copy whose header no longer claims pages the file lacks.

    SQLite refuses a file shorter than the page count in its header; zeroing the "version valid for" field
    (bytes 92-95) makes it size the database by the file instead, so every page still there can be read.
    """
    tmp = tempfile.TemporaryDirectory(prefix="gputop-salvage-")
    copy = Path(tmp.name) / "salvage.gputop"
    try:
        shutil.copyfile(path, copy)
        with open(copy, "r+b") as f:
            page_size = int.from_bytes(f.read(18)[16:18], "big")
            page_size = 65536 if page_size == 1 else page_size
            if page_size >= 512:  # a partial last page is lost anyway
                f.truncate(copy.stat().st_size // page_size * page_size)
            f.seek(92)
            f.write(bytes(4))
        db = _connect_read_only(copy)
        try:
            info = dataclasses.replace(_read_info(db, path), path=str(path))
        except BaseException:
            db.close()
            raise
    except (RecordingError, OSError):
        tmp.cleanup()
        raise damaged from None
    recording = Recording(db, info, cleanup=tmp.cleanup)
    recording.opened_damaged = True
    recording.damage = f"{path} is damaged: the file is cut short"
    return recording


_META_KEYS = ("format", "encoding", "gputop_version", "hostname", "started", "interval_s", "ended")
MAX_META_CHARS = 4096
"""The longest value of these keys read: a host name or a version is short, and anything longer is not one."""
MAX_INTERVAL_S = 86400.0
"""The longest sampling interval taken for real: a day."""


def _read_info(db: sqlite3.Connection, path: Path) -> RecordingInfo:
    """The recording's metadata, after checking the file is one of gputop's.

    Nothing is read from a table before its definition is known to be gputop's: a column of another definition
    can be computed on reading (``GENERATED ALWAYS AS (zeroblob(999999999))`` in a file of 16 KiB).
    """
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        schema = set(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master LIMIT 64"))
        tables = {name for kind, name, _, _ in schema if kind == "table"}
        if not {"meta", "snapshots"} <= tables:
            raise RecordingError(f"not a gputop recording: {path} (an SQLite database without its tables)")
        if ("table", "meta", "meta", TABLES["meta"]) not in schema:
            raise RecordingError(f"not a gputop recording: {path} (its tables are not gputop's)")
        meta = {
            key: _json_value(value)
            for key, value in db.execute(
                "SELECT key, CASE WHEN typeof(value) = 'text' AND length(value) <= ? THEN value END FROM meta "
                f"WHERE key IN ({', '.join('?' * len(_META_KEYS))})",
                (MAX_META_CHARS, *_META_KEYS),
            )
        }
    except sqlite3.DatabaseError as exc:
        raise _Damaged(f"cannot read {path}: damaged or not a recording ({exc})") from None
    if meta.get("format") != FORMAT:
        raise RecordingError(f"not a gputop recording: {path}")
    if version > SCHEMA_VERSION:
        raise RecordingError(
            f"{path} was written by a newer gputop (recording format {version}, "
            f"this gputop reads up to {SCHEMA_VERSION}): upgrade gputop"
        )
    if version < 1:
        raise RecordingError(f"not a gputop recording: {path} (no format version)")
    # Exactly the recorder's tables and their index: no other column, table, view or trigger.
    expected = {("table", name, name, sql) for name, sql in TABLES.items()}
    if schema != expected | {("index", "sqlite_autoindex_meta_1", "meta", None)}:
        raise RecordingError(f"not a gputop recording: {path} (its tables are not gputop's)")
    if meta.get("encoding") != ENCODING:
        raise RecordingError(f"{path}: unknown snapshot encoding {_text_or_none(meta.get('encoding'))!r}")
    return RecordingInfo(
        path=str(path),
        schema_version=version,
        gputop_version=_text_or_none(meta.get("gputop_version")),
        hostname=_text_or_none(meta.get("hostname")),
        started=_number_or_none(meta.get("started"), 0.0, MAX_TIME),
        interval_s=_number_or_none(meta.get("interval_s"), 0.0, MAX_INTERVAL_S),
        ended=_number_or_none(meta.get("ended"), 0.0, MAX_TIME),
    )


def _json_value(text: object) -> object:
    """The JSON value of a meta row, or None when it is not JSON (or too deeply nested to be one of ours)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _text_or_none(value: object) -> str | None:
    """A string from the file, made visible: the file may have been written by someone else."""
    return printable(value) if isinstance(value, str) else None


def _number_or_none(value: object, low: float, high: float) -> float | None:
    """A number from the file in ``low``..``high``, else None (JSON's ``true`` is an int to Python, and NaN and
    1e308 are floats)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        return None
    return float(value)
