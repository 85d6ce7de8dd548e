"""Recordings written by someone else, and recordings that hold secrets.

gputop runs as root and reads recording files (``gputop report FILE``, ``gputop replay FILE``) that another user
may have written: every hostile file here is built with sqlite3 directly, and goes through the real commands. A
recording holds every GPU process's command line, so it is created private to its owner (its -wal and -shm too),
exclusively, never through a planted symlink.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.codec import snapshot_json
from gputop.model import HostProcess, Snapshot
from gputop.remote.stream import SnapshotStream
from gputop.store import Recorder, RecordingError, open_recording
from gputop.store import recording as recording_module
from gputop.table import render_text
from gputop.ui.app import GputopApp
from gputop.ui.replay.app import replay_app
from gputop.ui.replay.cache import MOST_BYTES
from gputop.ui.replay.player import ReplayPlayer
from gputop.ui.replay.source import ReplaySource
from tests.replay.conftest import findings_ready
from tests.security.conftest import LocalUser
from tests.security.test_snapshot_decoder import with_tensor_device
from tests.ui import scenes, training_scenes
from tests.ui.conftest import USER, utc  # noqa: F401  (utc: the clocks on screen read the same everywhere)

ROWS = 20


def snapshots(n: int = ROWS) -> list[Snapshot]:
    return scenes.history(training_scenes.starved_job, n)


def record(path: Path, snaps: list[Snapshot]) -> Path:
    with Recorder(path, scenes.TICK_S, hostname=scenes.HOSTNAME, started=snaps[0].time) as recorder:
        for snap in snaps:
            recorder.append(snap)
    return path


def sql(path: Path, *statements: str | tuple[str, tuple[object, ...]]) -> Path:
    db = sqlite3.connect(path)
    for statement in statements:
        text, params = (statement, ()) if isinstance(statement, str) else statement
        db.execute(text, params)
    db.commit()
    db.close()
    return path


def zdict_of(path: Path) -> bytes:
    db = sqlite3.connect(path)
    [(value,)] = db.execute("SELECT value FROM meta WHERE key = 'zdict'").fetchall()
    db.close()
    return json.loads(value).encode()


def deflate(text: bytes, zdict: bytes = b"") -> bytes:
    packer = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return packer.compress(text) + packer.flush()


def bomb(size: int) -> bytes:
    """``size`` bytes of text that starts as a snapshot's JSON, deflated a thousandfold."""
    packer = zlib.compressobj(9)
    parts = [packer.compress(b'{"time":1763900000.0,"notices":["')]
    chunk = b"A" * (1 << 20)
    parts.extend(packer.compress(chunk) for _ in range(size // len(chunk)))
    parts.append(packer.flush())
    return b"".join(parts)


def bad_json_row(path: Path, rowid: int, change: Callable[[dict], object]) -> tuple[str, tuple[object, ...]]:
    """An UPDATE that puts a snapshot whose JSON ``change`` altered into row ``rowid``, deflated as gputop does."""
    tree = json.loads(snapshot_json(snapshots(1)[0]))
    change(tree)
    text = json.dumps(tree).replace('"DEEP"', "[" * 100_000 + "]" * 100_000)
    return "UPDATE snapshots SET data = ? WHERE rowid = ?", (deflate(text.encode(), zdict_of(path)), rowid)


# -- hostile files -----------------------------------------------------------------------------------------------

GPUTOP_TABLES = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO meta VALUES ('format', '\"gputop-recording\"'), ('encoding', '\"zlib+json\"'), "
    "('hostname', '\"evil\"'), ('started', '1763900000.0')",
    "PRAGMA user_version=1",
)


def generated_zeroblob(size: int) -> Callable[[Path], Path]:
    """A 16 KiB file whose every ``data`` is computed on reading: ``size`` bytes of zeros."""

    def make(path: Path) -> Path:
        return sql(
            path,
            *GPUTOP_TABLES,
            f"CREATE TABLE snapshots (time REAL NOT NULL, data BLOB GENERATED ALWAYS AS (zeroblob({size})) VIRTUAL)",
            "INSERT INTO snapshots (time) VALUES (1763900000.0), (1763900001.0), (1763900002.0)",
        )

    return make


def bombed(path: Path) -> Path:
    record(path, snapshots())
    return sql(path, ("UPDATE snapshots SET data = ? WHERE rowid = 7", (bomb(412 * 1024 * 1024),)))


WIDE_PROCESSES = 15


def wide_rows(rows: int, mib: float) -> Callable[[Path], Path]:
    """A recording of ``rows`` rows, each ``mib`` MiB of JSON, within the limits of one snapshot (16 MiB, 500,000
    values), that decodes to four times that: the command lines of host processes outside the job, of 'a's with
    one emoji each, a character that makes Python keep every character of its string in four bytes. Each row's
    command lines differ, so each row of changes holds them whole, and deflates them to a few KiB."""

    def make(path: Path) -> Path:
        base = snapshots(1)[0]
        chars = int(mib * 2**20 / WIDE_PROCESSES)
        with Recorder(path, scenes.TICK_S, hostname=scenes.HOSTNAME, started=base.time) as recorder:
            for row in range(rows):
                wide = tuple(
                    HostProcess(4_000_000 + k, command=f"{row}/{k} \U0001f600".ljust(chars, "a"))
                    for k in range(WIDE_PROCESSES)
                )
                at = base.time + row * scenes.TICK_S
                recorder.append(dataclasses.replace(base, time=at, host_processes=(*base.host_processes, *wide)))
        return path

    return make


def in_row(*statements: str) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        return sql(record(path, snapshots()), *statements)

    return make


def with_json(change: Callable[[dict], object]) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        record(path, snapshots())
        return sql(path, bad_json_row(path, 7, change))

    return make


def altered(*statements: str) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        record(path, snapshots())
        return sql(path, *statements)

    return make


SKIPPED = "skipped"
REFUSED = "refused"


@dataclass(frozen=True)
class Hostile:
    make: Callable[[Path], Path]
    outcome: str
    """``skipped``: reported, with one row skipped and said so; ``refused``: one line, exit status 2."""


HOSTILE = {
    "zlib bomb": Hostile(bombed, SKIPPED),
    "data INTEGER": Hostile(in_row("UPDATE snapshots SET data = 12345 WHERE rowid = 7"), SKIPPED),
    "data TEXT": Hostile(in_row("UPDATE snapshots SET data = 'not a blob' WHERE rowid = 7"), SKIPPED),
    "data NULL-ish empty": Hostile(in_row("UPDATE snapshots SET data = x'' WHERE rowid = 7"), SKIPPED),
    "time yesterday": Hostile(in_row("UPDATE snapshots SET time = 'yesterday' WHERE rowid = 7"), SKIPPED),
    "time 1e308": Hostile(in_row("UPDATE snapshots SET time = 1e308 WHERE rowid = 7"), SKIPPED),
    "time infinite": Hostile(in_row("UPDATE snapshots SET time = 9e999 WHERE rowid = 7"), SKIPPED),
    "json time yesterday": Hostile(with_json(lambda t: t.update(time="yesterday")), SKIPPED),
    "json time 1e308": Hostile(with_json(lambda t: t.update(time=1e308)), SKIPPED),
    "json list for a number": Hostile(with_json(lambda t: t["gpus"][0].update(temperature_c=[58])), SKIPPED),
    "json deep nesting": Hostile(with_json(lambda t: t["host"].update(cpu_percent="DEEP")), SKIPPED),
    "zeroblob 500000000": Hostile(generated_zeroblob(500_000_000), REFUSED),
    "zeroblob 999999999": Hostile(generated_zeroblob(999_999_999), REFUSED),
    "an extra column": Hostile(
        altered(
            "ALTER TABLE snapshots RENAME TO old",
            "CREATE TABLE snapshots (time REAL NOT NULL, data BLOB NOT NULL, note TEXT)",
            "INSERT INTO snapshots (rowid, time, data) SELECT rowid, time, data FROM old",
            "DROP TABLE old",
        ),
        REFUSED,
    ),
    "untyped columns": Hostile(
        altered(
            "ALTER TABLE snapshots RENAME TO old",
            "CREATE TABLE snapshots (time, data)",
            "INSERT INTO snapshots (rowid, time, data) SELECT rowid, time, data FROM old",
            "DROP TABLE old",
        ),
        REFUSED,
    ),
    "an extra table": Hostile(altered("CREATE TABLE notes (text TEXT)"), REFUSED),
    "a view": Hostile(altered("CREATE VIEW everything AS SELECT * FROM snapshots"), REFUSED),
    "a trigger": Hostile(
        altered("CREATE TRIGGER t AFTER INSERT ON snapshots BEGIN DELETE FROM meta; END"),
        REFUSED,
    ),
}


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("hostile")
    return {name: case.make(directory / f"{name.replace(' ', '-')}.gputop") for name, case in HOSTILE.items()}


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    max_rss_mib: float
    cpu_s: float


MEASURE = """
import json, resource, subprocess, sys
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.run(sys.argv[3:]).returncode
use = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "rss_kib": use.ru_maxrss, "cpu_s": use.ru_utime + use.ru_stime}, f)
"""
"""Runs a command and writes its exit status, peak RSS and CPU time. It runs as a small process of its own: a
child forked straight from the test process would count the test process's pages, up to the exec, in its peak."""


def gputop(*args: str, memory_limit: int = 2 * 1024**3) -> Run:
    """Run the real gputop, under an address-space limit so that a broken one cannot take the machine down, and
    measure its peak RSS and CPU time."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        measured = os.path.join(tmp, "measured.json")
        command = [sys.executable, "-m", "gputop", *args]
        env = {**os.environ, "TZ": "UTC"}
        subprocess.run(
            [sys.executable, "-c", MEASURE, measured, str(memory_limit), *command],
            stdout=out,
            stderr=err,
            env=env,
            check=True,
        )
        with open(measured) as f:
            use = json.load(f)
        out.seek(0)
        err.seek(0)
        return Run(
            use["code"],
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            use["rss_kib"] / 1024,
            use["cpu_s"],
        )


@pytest.mark.parametrize("name", HOSTILE, ids=list(HOSTILE))
def test_gputop_report_over_a_hostile_recording_is_a_clean_line_never_a_traceback(
    hostile_files: dict[str, Path], name: str
) -> None:
    path = hostile_files[name]
    for args in (("report", str(path)), ("report", str(path), "--json")):
        done = gputop(*args)
        assert "Traceback" not in done.stderr, done.stderr
        if HOSTILE[name].outcome == REFUSED:
            assert done.returncode == 2, done
            assert done.stdout == "" and done.stderr.count("\n") == 1, done
            assert done.stderr.startswith(f"gputop: error: not a gputop recording: {path}"), done.stderr
        else:
            assert done.returncode == 0, done
            assert done.stderr == ""
            if "--json" in args:
                document = json.loads(done.stdout)["recording"]
                assert document["snapshots"] == ROWS - 1
                assert document["skipped"] == 1
                assert "skipped 1 snapshot row " in document["damage"]
            else:
                assert f"{ROWS - 1} snapshots on gpu-node-07" in done.stdout
                assert "Note: " in done.stdout and "skipped 1 snapshot row that cannot be read" in done.stdout


@pytest.mark.parametrize("name", ["zlib bomb", "zeroblob 500000000", "zeroblob 999999999"])
def test_gputop_report_over_a_bomb_stays_bounded(hostile_files: dict[str, Path], name: str) -> None:
    """Bounds that the unbounded reader broke (865 MiB, 1.93 GiB, MemoryError) and a busy machine does not; the
    targets themselves (100 MiB, 2 s of CPU) are measured and reported by ``benchmarks/abuse.py``."""
    done = gputop("report", str(hostile_files[name]))
    assert "Traceback" not in done.stderr
    assert done.max_rss_mib < 400, done
    assert done.cpu_s < 10, done


def test_the_zlib_bomb_is_a_small_file() -> None:
    assert 300 * 1024 < len(bomb(412 * 1024 * 1024)) < 520 * 1024


# -- what the recording's meta says ------------------------------------------------------------------------------


def test_meta_from_outside_is_made_printable_and_bounded(tmp_path: Path) -> None:
    path = record(tmp_path / "meta.gputop", snapshots())
    sql(
        path,
        "UPDATE meta SET value = '\"gpu\\u001b]0;pwned\\u0007-node\\u202e\\ud800\"' WHERE key = 'hostname'",
        "UPDATE meta SET value = '\"0.1\\u001b[2J\"' WHERE key = 'gputop_version'",
        "UPDATE meta SET value = '1e308' WHERE key = 'started'",
        "UPDATE meta SET value = 'NaN' WHERE key = 'interval_s'",
        "INSERT OR REPLACE INTO meta VALUES ('ended', '[[[[1]]]]')",
        "INSERT OR REPLACE INTO meta VALUES ('window_s', '1e-300')",  # would judge at 700 snapshots a second
    )
    with open_recording(path) as recording:
        info = recording.info
        assert info.hostname == "gpu\\x1b]0;pwned\\x07-node\\u202e\\ud800"
        assert info.gputop_version == "0.1\\x1b[2J"
        assert info.started is None and info.interval_s is None and info.ended is None and info.window_s is None
        assert len(list(recording)) == ROWS
    for args in (("report", str(path)), ("report", str(path), "--json")):
        done = gputop(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done
        assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "\x07" not in done.stdout


@pytest.mark.parametrize(
    "value",
    [
        "12345",  # an INTEGER
        "x'00'",  # a BLOB
        "'[' || replace(zeroblob(100000), x'00', '[') || ']'",  # deep nesting in JSON
        "'\"' || replace(zeroblob(17 * 1024 * 1024), x'00', 'a') || '\"'",  # a dictionary over the bound
    ],
    ids=["integer", "blob", "deep", "huge"],
)
def test_a_bad_meta_value_is_ignored(tmp_path: Path, value: str) -> None:
    path = record(tmp_path / "meta.gputop", snapshots())
    sql(path, *(f"UPDATE meta SET value = {value} WHERE key = '{key}'" for key in ("hostname", "zdict")))
    with open_recording(path) as recording:
        assert recording.info.hostname is None
        assert list(recording) == []  # without its dictionary no row decodes...
        assert recording.damage is not None and f"skipped {ROWS} snapshot rows" in recording.damage  # ...said so
    done = gputop("report", str(path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done
    assert f"skipped {ROWS} snapshot rows that cannot be read" in done.stdout


def test_a_meta_value_that_is_not_json_is_ignored_and_the_format_still_checked(tmp_path: Path) -> None:
    path = record(tmp_path / "meta.gputop", snapshots())
    sql(path, "UPDATE meta SET value = x'00' WHERE key = 'format'")
    with pytest.raises(RecordingError, match="not a gputop recording"):
        open_recording(path)


# -- the replay --------------------------------------------------------------------------------------------------


async def test_a_replay_over_hostile_rows_stays_up_says_so_and_steps_over_them(tmp_path: Path) -> None:
    snaps = snapshots()
    path = record(tmp_path / "bad.gputop", snaps)
    sql(
        path,
        "UPDATE snapshots SET data = 12345 WHERE rowid = 4",
        "UPDATE snapshots SET time = 'yesterday' WHERE rowid = 6",
        ("UPDATE snapshots SET data = ? WHERE rowid = 9", (bomb(64 * 1024 * 1024),)),
        bad_json_row(path, 11, lambda t: t["gpus"][0].update(temperature_c=[58])),
        bad_json_row(path, 13, lambda t: t["host"].update(cpu_percent="DEEP")),
        bad_json_row(path, 15, lambda t: t.update(time=1e308)),
    )
    good = [snap for rowid, snap in enumerate(snaps, 1) if rowid not in (4, 6, 9, 11, 13, 15)]
    recording = open_recording(path)
    try:
        app = replay_app(ReplayPlayer(ReplaySource(recording), play=False), user=USER)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert "bad.gputop is damaged: skipped 2 snapshot rows that cannot be read" in banner(app)
            shown = [app.snapshot]
            for _ in range(len(snaps)):
                await pilot.press("full_stop")
                if app.snapshot is not shown[-1]:
                    shown.append(app.snapshot)
            assert shown == good  # every readable snapshot, in order, the bad rows stepped over
            assert any(n.title == "Skipped a snapshot" for n in app._notifications)
            for _ in range(len(snaps)):
                await pilot.press("comma")
            assert app.snapshot == good[0]
            await findings_ready(pilot, app)
            await pilot.press("full_stop")  # the banner is redrawn with the next snapshot
            assert "4 snapshots do not decode: they are stepped over" in banner(app)
            assert app.is_running
    finally:
        recording.close()


async def test_a_replay_steps_over_a_tensor_device_named_with_other_digits_and_its_training_screen_opens(
    tmp_path: Path,
) -> None:
    """``cuda:²`` passes ``str.isdigit``, and ``int`` then raised on the training screen (``l``): exit 1."""
    snaps = snapshots()
    hostile = {rowid: with_tensor_device(snap, "cuda:²") for rowid, snap in enumerate(snaps, 1) if 8 <= rowid <= 12}
    path = record(tmp_path / "device.gputop", [hostile.get(rowid, snap) for rowid, snap in enumerate(snaps, 1)])
    recording = open_recording(path)
    try:
        player = ReplayPlayer(ReplaySource(recording), play=False, start_time=snaps[9].time)
        app = replay_app(player, user=USER)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            assert app.snapshot == snaps[12]  # the next readable snapshot after the hostile rows
            await pilot.press("l")
            assert type(app.screen).__name__ == "TrainingScreen"
            await pilot.press("comma")  # back over the hostile rows, on the training screen
            assert app.snapshot == snaps[6]
            await pilot.pause()
            assert app.is_running
    finally:
        recording.close()


def test_a_replay_of_rows_that_decode_to_tens_of_mib_holds_them_within_its_cache_bound(tmp_path: Path) -> None:
    """Only the count of decoded snapshots was bounded: 512 rows of 29 MiB each grew a replay to 6 GiB."""
    path = wide_rows(rows=48, mib=1.0)(tmp_path / "wide.gputop")
    assert path.stat().st_size < 2 * 2**20  # each row deflates to a few KiB (the first is also the dictionary)
    decoded = 4 * 2**20  # a row's snapshot, as Python holds it
    with open_recording(path) as recording:
        source = ReplaySource(recording)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for position in [*range(len(source)), *reversed(range(len(source)))]:  # `$` and `0`, with every step
                assert source.read(position) is not None
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    # The cache's bound, and the recording's whole snapshot and texts at hand, which rows of changes are read from.
    assert held < MOST_BYTES + 3 * decoded, f"{held / 2**20:.0f} MiB held"


def banner(app: GputopApp) -> str:
    from gputop.ui.widgets.banner import Banner

    return " ".join(app.screen.query_one(Banner).messages)


# -- the hosts view ----------------------------------------------------------------------------------------------


def test_a_remote_host_sending_hostile_snapshots_gets_only_well_typed_printable_ones_through() -> None:
    stream = SnapshotStream(1.0)
    good = snapshots(1)[0]
    tree = json.loads(snapshot_json(good))
    hostile = [
        {**tree, "time": "yesterday"},
        {**tree, "time": 1e308},
        {**tree, "gpus": [{**tree["gpus"][0], "temperature_c": [1]}]},
        {**tree, "host": 5},
        {**tree, "processes": [{**tree["processes"][0], "pid": 10**30}]},
        json.loads(snapshot_json(with_tensor_device(good, "cuda:²"))),
    ]
    lines = [json.dumps(value).encode() for value in hostile]
    lines.append(b"[" * 500_000 + b"]" * 500_000)
    lines.append(json.dumps({**tree, "notices": ["\x1b]0;pwned\x07"]}).encode())
    lines.append(snapshot_json(good))

    received = stream.feed(b"\n".join(lines) + b"\n")

    assert stream.bad == 7
    assert received == [dataclasses.replace(good, notices=("\\x1b]0;pwned\\x07",)), good]


def test_a_remote_host_sending_implausible_gpu_values_shows_them_as_unavailable() -> None:
    """−50 %, 1e14 %, −1e15 °C and "16.0EiB / 0B" were shown as a host sent them."""
    good = snapshots(1)[0]
    tree = json.loads(snapshot_json(good))
    gpu = tree["gpus"][0]
    gpu.update(utilization_gpu_percent=-50, sm_activity_percent=1e14, temperature_c=-1e15)
    gpu.update(memory_used_bytes=2**64 - 1, memory_total_bytes=0)
    stream = SnapshotStream(1.0)

    (received,) = stream.feed(json.dumps(tree).encode() + b"\n")

    shown = received.gpus[0]
    for name in ("utilization_gpu_percent", "sm_activity_percent", "temperature_c", "memory_used_bytes"):
        assert (getattr(shown, name), shown.unavailable[name]) == (None, "invalid value")
    text = render_text(received)
    assert "-50" not in text and "1e+14" not in text and "EiB" not in text and "-1e+15" not in text
    assert stream.bad == 0  # the rest of the snapshot is shown


# -- who can read a recording ------------------------------------------------------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can enter and list, as a shared scratch or project directory is (pytest's own
    temporary directories are private to root, which would hide the file's own mode)."""
    directory = Path(tempfile.mkdtemp(prefix="gputop-shared-", dir="/tmp"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def cannot_read(user: LocalUser, path: Path | str) -> bool:
    try:
        user.run(["cat", str(path)], capture_output=True)
    except subprocess.CalledProcessError as failed:
        return b"Permission denied" in failed.stderr
    return False


def test_a_recording_and_its_wal_and_shm_are_private_to_their_owner(
    other_user: LocalUser, shared_dir: Path, usual_umask: None
) -> None:
    public = shared_dir / "public.txt"
    public.write_text("anyone may read this\n")
    assert not cannot_read(other_user, public)  # the directory lets the other user in: only modes keep them out
    path = shared_dir / "job.gputop"
    snap = training_scenes.starved_job()
    recorder = Recorder(path, 1.0, flush_every_s=0)
    try:
        recorder.append(snap)  # committed: the -wal and -shm files are there
        for name in (path, f"{path}-wal", f"{path}-shm"):
            assert os.path.exists(name)
            assert mode(name) == 0o600, f"{name}: {oct(mode(name))}"
            assert cannot_read(other_user, name), name
    finally:
        recorder.close()
    assert mode(path) == 0o600
    assert cannot_read(other_user, path)
    with open_recording(path) as recording:
        assert list(recording) == [snap]


def test_gputop_record_creates_a_private_file(other_user: LocalUser, shared_dir: Path, usual_umask: None) -> None:
    path = shared_dir / "cli.gputop"
    recorder = Recorder(path)
    recorder.close()
    assert mode(path) == 0o600 and cannot_read(other_user, path)


@pytest.mark.parametrize("target", ["dangling", "existing"])
def test_a_symlink_at_the_path_is_refused_and_never_followed(tmp_path: Path, target: str) -> None:
    victim = tmp_path / "victim"
    if target == "existing":
        victim.write_bytes(b"keep me")
    path = tmp_path / "planted.gputop"
    path.symlink_to(victim)
    with pytest.raises(RecordingError, match=r"already exists: choose a new file$"):
        Recorder(path)
    assert path.is_symlink()
    assert (victim.read_bytes() == b"keep me") if target == "existing" else not victim.exists()


def test_a_symlink_planted_after_the_checks_is_never_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between looking at the path and creating the file, another user can plant a symlink: the creation itself
    must refuse it."""
    victim = tmp_path / "victim"
    path = tmp_path / "raced.gputop"
    checks = recording_module._check_writable

    def check_then_plant(checked: Path) -> None:
        checks(checked)
        path.symlink_to(victim)  # planted right after the look

    monkeypatch.setattr(recording_module, "_check_writable", check_then_plant)
    with pytest.raises(RecordingError, match="already exists"):
        Recorder(path)
    assert path.is_symlink() and not victim.exists()
