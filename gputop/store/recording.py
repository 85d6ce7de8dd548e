"""A recording: snapshots in an SQLite file, written in batches, read back as the same frozen dataclasses.

The format is described in docs/recording.md. In short: WAL mode, ``PRAGMA user_version`` is the schema version,
a ``meta`` table of JSON values, and a ``snapshots`` table of ``(time REAL, data BLOB)`` where ``data`` is the
deflated (zlib) JSON of the whole snapshot, every dataclass an object keyed by field name, with the first
snapshot's JSON (``meta.zdict``) as the preset dictionary.
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
from gputop.model import Snapshot, frozen_reasons

SCHEMA_VERSION = 1
FORMAT = "gputop-recording"
ENCODING = "zlib+json"
DEFAULT_FLUSH_EVERY_S = 2.0
_CHUNK = 256


class RecordingError(Exception):
    """A recording that cannot be written or read: the message is one line, fit to show to the user."""


# -- encoding ---------------------------------------------------------------------------------------------------


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


@functools.cache
def _decoder(hint: object) -> Decoder:
    """A function from the JSON value of a field typed ``hint`` to the model's value, built once per type from the
    type hints (walking the hints anew for every value costs twice as much). ``None`` stays ``None`` anywhere."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        [inner] = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decoder(inner)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return _checked(list, "a list", lambda value: tuple(item(v) for v in value))
        items = tuple(_decoder(a) for a in args)
        return _checked(list, "a list", lambda value: tuple(d(v) for d, v in zip(items, value, strict=True)))
    if origin is Mapping:
        return _checked(dict, "an object", frozen_reasons)
    return lambda value: value


def _dataclass_decoder(cls: type) -> Decoder:
    # Fields are looked up at the first decode: a model class may refer to itself (a tree) through its hints. The
    # tuple is built whole, then published, so a thread decoding at the same time never sees half of it.
    fields: list[tuple[tuple[str, Decoder], ...]] = []

    def decode(value: dict) -> object:
        if not fields:
            fields.append(tuple((name, _decoder(hint)) for name, hint in _fields_of(cls)))
        # Unknown keys (fields added by a later minor change) are ignored; missing ones take their defaults.
        return cls(**{name: field(value[name]) for name, field in fields[0] if name in value})

    return _checked(dict, f"an object for {cls.__name__}", decode)


def _checked(kind: type, what: str, decode: Callable[[typing.Any], object]) -> Decoder:
    def checked(value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, kind):
            raise ValueError(f"expected {what}")
        return decode(value)

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
    """The snapshot whose ``snapshot_json`` is ``text``. Raises ``ValueError`` on anything else."""
    try:
        snap = _decoder(Snapshot)(json.loads(text))
    except (UnicodeDecodeError, TypeError, KeyError) as exc:
        raise ValueError(str(exc)) from exc
    if not isinstance(snap, Snapshot):
        raise ValueError("not a snapshot")
    return snap


def decode_snapshot(data: bytes, zdict: bytes = b"") -> Snapshot:
    """The snapshot ``encode_snapshot`` encoded, equal to it with ``==``. Raises ``ValueError`` on bad data."""
    try:
        unpacker = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
        text = unpacker.decompress(data) + unpacker.flush()
    except zlib.error as exc:
        raise ValueError(str(exc)) from exc
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
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise RecordingError(f"cannot create {self.path}: {exc}") from None
        try:
            # 16 KiB pages fit a dozen snapshots of an 8-GPU machine with little slack (docs/recording.md).
            self._db.execute("PRAGMA page_size=16384")
            self._db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode, NORMAL survives a killed process (not a power cut) and spares an fsync per commit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("BEGIN")
            self._db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.execute("CREATE TABLE snapshots (time REAL NOT NULL, data BLOB NOT NULL)")
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
    if path.exists() or path.is_symlink():
        raise RecordingError(f"{path} already exists: choose a new file")
    parent = path.parent
    if not parent.is_dir():
        raise RecordingError(f"cannot create {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RecordingError(f"cannot create {path}: directory {parent} is not writable")


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


class Recording:
    """An open recording: ``info`` and the snapshots, in the order they were recorded (time order).

    Iterating reads the file afresh, so a recording still being written shows the batches committed so far.
    A damaged file yields every snapshot that can still be read and sets ``damage`` to a one-line description.
    """

    def __init__(
        self, db: sqlite3.Connection, info: RecordingInfo, cleanup: Callable[[], object] | None = None
    ) -> None:
        self._db = db
        self.info = info
        self.damage: str | None = None
        self.opened_damaged = False
        self._cleanup = cleanup
        self._zdict: bytes | None = None

    def __iter__(self) -> Iterator[Snapshot]:
        return self.snapshots()

    def snapshots(self) -> Iterator[Snapshot]:
        self.damage = f"{self.info.path} is damaged: the file is cut short" if self.opened_damaged else None
        last = 0
        skipped = 0
        zdict = self._dictionary()
        while True:
            try:
                rows = self._rows(last, _CHUNK)
            except sqlite3.DatabaseError:
                rows = []  # read on one row at a time up to the damage
            if not rows:
                try:
                    rows = self._rows(last, 1)
                except sqlite3.DatabaseError as exc:
                    self.damage = f"{self.info.path} is damaged: stopped reading after snapshot row {last} ({exc})"
                    return
            if not rows:
                break
            for rowid, data in rows:
                if rowid <= last:  # a damaged b-tree can lead back: stop rather than loop
                    self.damage = f"{self.info.path} is damaged: stopped reading after snapshot row {last}"
                    return
                last = rowid
                try:
                    snap = decode_snapshot(data, zdict)
                except ValueError:
                    skipped += 1
                    continue
                yield snap
        if skipped and self.damage is None:
            self.damage = f"{self.info.path} is damaged: skipped {skipped} snapshot(s) that could not be decoded"

    def index(self) -> list[tuple[int, float]]:
        """``(rowid, time)`` of every snapshot row that can be reached, in recorded order, without decoding any:
        what a replay needs to lay out its timeline. Reading stops at damage (``damage`` says so)."""
        found: list[tuple[int, float]] = []
        last = 0
        while True:
            try:
                rows = self._db.execute(
                    "SELECT rowid, time FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT 4096", (last,)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                rows = []
                try:
                    rows = self._db.execute(
                        "SELECT rowid, time FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT 1", (last,)
                    ).fetchall()
                except sqlite3.DatabaseError:
                    self.damage = f"{self.info.path} is damaged: stopped reading after snapshot row {last} ({exc})"
                    return found
            if not rows or rows[0][0] <= last:
                return found
            for rowid, at in rows:
                if rowid <= last:
                    self.damage = f"{self.info.path} is damaged: stopped reading after snapshot row {last}"
                    return found
                last = rowid
                if isinstance(at, (int, float)):
                    found.append((rowid, float(at)))

    def read(self, rowid: int) -> Snapshot:
        """The snapshot in row ``rowid`` (from ``index``). Raises ``RecordingError`` when it cannot be read."""
        try:
            row = self._db.execute("SELECT data FROM snapshots WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{self.info.path} is damaged: cannot read snapshot row {rowid} ({exc})") from None
        if row is None:
            raise RecordingError(f"{self.info.path}: no snapshot row {rowid}")
        try:
            return decode_snapshot(row[0], self._dictionary())
        except ValueError as exc:
            raise RecordingError(f"{self.info.path} is damaged: snapshot row {rowid} does not decode ({exc})") from None

    def _dictionary(self) -> bytes:
        """The preset dictionary, written with the first batch (so read again until it is there)."""
        if self._zdict is None:
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'zdict'").fetchone()
                if row is not None:
                    self._zdict = json.loads(row[0]).encode()
            except (sqlite3.DatabaseError, ValueError, AttributeError):
                pass
        return self._zdict or b""

    def _rows(self, after: int, limit: int) -> list[tuple[int, bytes]]:
        return self._db.execute(
            "SELECT rowid, data FROM snapshots WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, limit)
        ).fetchall()

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


def _read_info(db: sqlite3.Connection, path: Path) -> RecordingInfo:
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "snapshots"} <= tables:
            raise RecordingError(f"not a gputop recording: {path} (an SQLite database without its tables)")
        meta = {}
        for key, value in db.execute("SELECT key, value FROM meta"):
            try:
                meta[key] = json.loads(value)
            except (TypeError, ValueError):
                meta[key] = None
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
    if meta.get("encoding") != ENCODING:
        raise RecordingError(f"{path}: unknown snapshot encoding {meta.get('encoding')!r}")
    return RecordingInfo(
        path=str(path),
        schema_version=version,
        gputop_version=_opt(meta.get("gputop_version"), str),
        hostname=_opt(meta.get("hostname"), str),
        started=_opt(meta.get("started"), float),
        interval_s=_opt(meta.get("interval_s"), float),
        ended=_opt(meta.get("ended"), float),
    )


def _opt(value: object, kind: Callable[[object], object]) -> typing.Any:
    try:
        return None if value is None else kind(value)
    except (TypeError, ValueError):
        return None
