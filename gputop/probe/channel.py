"""The probe channel: where reports live, and how one is written so that a reader never sees half of it.

One JSON file per process, ``<dir>/<pid>.json``, in a directory only its user can enter. Both sides use this
module (the probe inside the training job, the monitor outside), so it needs nothing beyond the standard library:
in the job it is loaded from its files as part of ``gputop_probe``, where no other gputop module can be imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile

REPORT_FORMAT = "gputop-probe"
REPORT_VERSION = 1
DIR_ENV = "GPUTOP_PROBE_DIR"
RUN_ID_ENV = "GPUTOP_RUN_ID"
"""Set by ``gputop run`` for the whole job: its reports carry it, so the job's last reports can be found."""
WRITE_INTERVAL_S = 0.5
PID_MAX = 1 << 22
"""The kernel's ``PID_MAX_LIMIT``: no process has a larger PID."""
MAX_REPORT_BYTES = 256 << 10
"""The largest report read, by the monitor or by a probe looking for its run's reports: about 20 times the
largest report a real job writes (ten DataLoaders of 64 workers each, eight GPUs)."""


def report_dir() -> str:
    """The report directory: ``$GPUTOP_PROBE_DIR``, else ``$XDG_RUNTIME_DIR/gputop``, else one under the temp dir.

    ``$XDG_RUNTIME_DIR`` is already private to its user; the temp dir is shared, so the name there carries the
    user id and the directory is checked before use (another user may have made it first).
    """
    return report_dir_and_source()[0]


def report_dir_and_source() -> tuple[str, str]:
    """``report_dir()`` and what chose it, in words (``$GPUTOP_PROBE_DIR``, ``$XDG_RUNTIME_DIR``, the temporary
    directory), for ``gputop doctor``."""
    explicit = os.environ.get(DIR_ENV)
    if explicit:
        return explicit, f"${DIR_ENV}"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "gputop"), "$XDG_RUNTIME_DIR"
    return os.path.join(tempfile.gettempdir(), f"gputop-{os.geteuid()}"), "the temporary directory"


def report_path(directory: str, pid: int) -> str:
    return os.path.join(directory, f"{pid}.json")


def report_pid(name: str) -> int | None:
    """The PID that a file name ``<pid>.json`` names, or None for any other name: a temporary file, or a name no
    process can have written (``0.json``, ``007.json``, ``99999999999999999999.json``, ``²³.json``, whose
    digits ``str.isdigit`` accepts and ``int`` does not)."""
    stem, _, ext = name.partition(".")
    if ext != "json" or not stem.isascii() or not stem.isdigit():
        return None
    pid = int(stem)
    return pid if 0 < pid <= PID_MAX and str(pid) == stem else None


def unsafe_reason(directory: str) -> str | None:
    """Why this directory must not carry reports (not ours, open to others, a symlink), or None when it is fine."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return "report directory does not exist"
    except OSError as exc:
        return f"report directory unreadable: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return "report directory is not a directory"
    if info.st_uid != os.geteuid():
        return f"report directory {directory} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o077:
        return f"report directory {directory} is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def ensure_dir(directory: str) -> str | None:
    """Create the directory (0700) if it is missing; return why it cannot be used, or None."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        return f"cannot create report directory {directory}: {exc.strerror}"
    return unsafe_reason(directory)


def write_report(directory: str, pid: int, data: bytes) -> None:
    """Replace ``<pid>.json`` atomically: a reader sees the old report or the new one, never a mix.

    The temporary file is always a new one: opening an existing name would write through whatever is there, a
    hard link to another file included.
    """
    temp = os.path.join(directory, f".{pid}.json.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)  # left by a writer that was killed, or planted: removed, never written through
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(temp, report_path(directory, pid))


def remove_dead_reports(directory: str, keep_run: str | None = None) -> None:
    """Delete the reports of processes that no longer exist, so a reused PID never meets an old report; those that
    carry ``keep_run`` as their run id are kept: the run is under way, and ``gputop run`` reads each of its
    processes' last report when it ends (a rank that finished before another started writing lost its own)."""
    for name in os.listdir(directory):
        pid = report_pid(name)
        if pid is None:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            path = os.path.join(directory, name)
            if keep_run is not None and _run_of(path) == keep_run:
                continue
            with contextlib.suppress(OSError):
                os.unlink(path)
        except OSError:  # alive but not ours to signal
            pass


class Unreadable(Exception):
    """A report that is there but is not read, with the reason: not a regular file, another user's, too large, or
    an error from the system. ``foreign``: it is another user's."""

    def __init__(self, reason: str, foreign: bool = False) -> None:
        super().__init__(reason)
        self.foreign = foreign


def read_report_bytes(path: str, owner: int | None = None) -> bytes:
    """The bytes of the report at ``path``: opened without following a link or waiting on a FIFO, a regular file
    of at most ``MAX_REPORT_BYTES``, owned by ``owner`` where one is given. Raises ``FileNotFoundError`` where there
    is none and ``Unreadable`` for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unreadable(f"cannot open report: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("report is not a regular file")
        if owner is not None and info.st_uid != owner:
            raise Unreadable(f"report owned by uid {info.st_uid}, not by this user", foreign=True)
        if info.st_size > MAX_REPORT_BYTES:
            raise Unreadable(f"report too large ({info.st_size} bytes)")
        data = os.read(fd, MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read report: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_REPORT_BYTES:  # it grew after fstat
        raise Unreadable("report too large")
    return data


def _run_of(path: str) -> str | None:
    """The run id a report carries; None for one that cannot be read, is too large, or is not a report."""
    try:
        run = json.loads(read_report_bytes(path)).get("run_id")
    except (OSError, Unreadable, ValueError, AttributeError):
        return None
    return run if isinstance(run, str) else None
