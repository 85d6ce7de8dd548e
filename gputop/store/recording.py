"""A recording: snapshots in an SQLite file, written in batches, read back as the same frozen dataclasses.

The format is described in docs/recording.md. In short: WAL mode, ``PRAGMA user_version`` is the schema version,
a ``meta`` table of JSON values, and a ``snapshots`` table of ``(time REAL, data BLOB)`` where ``data`` is a row
of ``gputop.store.rows``: the deflated (zlib) JSON of a whole snapshot or of its changes from one, with the first
snapshot's JSON (``meta.zdict``) as the preset dictionary.

A recording may have been written by someone else: reading checks the tables and bounds every row and every
inflation (``MAX_SNAPSHOT_BYTES``), and the snapshot decoder (``gputop.codec``) checks the type and range of every
value and makes every string printable ("Reading files from someone else" in the docs).
Recordings are created private to their owner: they hold every GPU process's command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gputop import __version__
from gputop.codec import MAX_SNAPSHOT_BYTES, MAX_TIME
from gputop.files import PRIVATE, create_new
from gputop.frozen import immutable
from gputop.limits import MAX_SECONDS, MIN_WINDOW_S
from gputop.model import Snapshot
from gputop.sanitize import printable
from gputop.store.rows import ENCODING, SCHEMA_VERSION, RowReader, RowWriter, WeighedSnapshot

TABLES = {
    "meta": "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "snapshots": "CREATE TABLE snapshots (time REAL NOT NULL, data BLOB NOT NULL)",
}
"""The tables of every format so far, as the recorder creates them: a reader finds these exact definitions in
``sqlite_master``, or the file is not one of gputop's."""
FORMAT = "gputop-recording"
DEFAULT_FLUSH_EVERY_S = 2.0
_CHUNK = 256


class RecordingError(Exception):
    """A recording that cannot be written or read: the message is one line, fit to show to the user."""


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
        window_s: float | None = None,
        flush_every_s: float = DEFAULT_FLUSH_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.flush_every_s = flush_every_s
        self._clock = clock
        self._pending: list[tuple[float, bytes]] = []
        self._rows = RowWriter()
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
                "window_s": window_s,
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
        with self._lock:
            if self._closed:
                return
            self._pending.append((snap.time, self._row(snap)))
        self.tick()

    def _row(self, snap: Snapshot) -> bytes:
        data, zdict = self._rows.row(snap)
        if zdict is not None:
            self._pending_meta.append(("zdict", json.dumps(zdict.decode())))
        return data

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


@immutable
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
    window_s: float | None = None
    """The advisor's window of the run that recorded it (``gputop run --record``): replayed and reported with the
    same window, a recording gives the findings the run gave. None for ``gputop record`` and older recordings."""


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
        self._rows = RowReader(info.schema_version)
        """What ``read`` decoded last: the rows of changes after it are read from it."""

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
        reader = RowReader(self.info.schema_version)
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
                        snap = reader.read_next(data, zdict, rowid)
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
        """The snapshot in row ``rowid`` (from ``index``). Raises ``RecordingError`` when it cannot be read.

        In format 4 a row may hold only its snapshot's changes: it is read from the last whole snapshot at or before
        it, or from the row before when that was the last one read (as a replay steps and its findings pass go)."""
        return self.read_weighed(rowid).snapshot

    def read_weighed(self, rowid: int) -> WeighedSnapshot:
        """``read``, with at most how much memory the snapshot holds: what a cache of them counts."""
        try:
            data = self._row_data(rowid)
            return self._rows.read_at(data, self._dictionary(), rowid, lambda back: self._row_data(back, None))
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{self.info.path} is damaged: cannot read snapshot row {rowid} ({exc})") from None
        except ValueError as exc:
            raise RecordingError(f"{self.info.path} is damaged: snapshot row {rowid} does not decode ({exc})") from None

    def _row_data(self, rowid: int, missing: object = RecordingError) -> object:
        """The data of row ``rowid`` (None where it is not a snapshot's); where there is no such row,
        RecordingError, or ``missing`` when given (a row a delta names, which then does not decode)."""
        row = self._db.execute(
            f"SELECT CASE WHEN {_ROW_OK} THEN data END FROM snapshots WHERE rowid = ?", (rowid,)
        ).fetchone()
        if row is None:
            if missing is RecordingError:
                raise RecordingError(f"{self.info.path}: no snapshot row {rowid}")
            return missing
        return row[0]

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


_META_KEYS = ("format", "encoding", "gputop_version", "hostname", "started", "interval_s", "ended", "window_s")
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
        window_s=_number_or_none(meta.get("window_s"), MIN_WINDOW_S, MAX_SECONDS),
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
