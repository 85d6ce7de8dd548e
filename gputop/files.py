"""Files gputop writes: created exclusively, never through a planted symlink, private when asked.

gputop often runs as root in directories other users can write to. A file opened by a name that another user
can predict and plant as a symlink (``report.json.1234.tmp``) lets that user make root overwrite any file. Every
file gputop writes is therefore created here: new files with ``O_CREAT | O_EXCL | O_NOFOLLOW``, and files that
replace another (reports, the node_exporter textfile) written to a fresh temporary name from ``mkstemp`` in the
same directory, then renamed over the target, so a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

PRIVATE = 0o600
"""Owner only: for anything that holds command lines (recordings, reports), which may carry secrets."""
SHARED = 0o644
"""For what other users' tools must read (node_exporter's textfile collector often runs as another user)."""


def create_new(path: str | os.PathLike[str], mode: int = PRIVATE) -> int:
    """A new file at ``path`` opened for writing, as a file descriptor; raises ``FileExistsError`` if anything is
    there already (a symlink included, dangling or not) and OSError for the rest."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with contextlib.suppress(OSError):
        os.fchmod(fd, mode)  # the umask may have taken bits the caller asked for (SHARED under umask 077)
    return fd


def create_fresh(path: str | os.PathLike[str], mode: int = PRIVATE) -> int:
    """Like ``create_new``, for a name gputop owns (a report's temporary file, a job's log): whatever is already
    there (left by a writer that was killed, or put there) is removed, never written through."""
    try:
        return create_new(path, mode)
    except FileExistsError:
        os.unlink(path)
        return create_new(path, mode)


def replace_file(path: str | os.PathLike[str], data: bytes, mode: int = PRIVATE) -> None:
    """Write ``data`` to ``path`` atomically: to a new temporary file beside it (exclusive, ``mode``), then
    ``os.replace`` over ``path``. A symlink at ``path`` is replaced, not followed. Raises OSError; the temporary
    file is gone either way."""
    directory, name = os.path.split(os.fspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """Raise the OSError that ``replace_file(path, ...)`` would meet for what is known now, so that a command says
    so before its work rather than after it: ``path`` a directory, its directory missing, or no new file allowed
    there (tried for real, with a temporary file made and removed: permission bits say nothing to root, nor of a
    read-only file system)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    directory = os.path.dirname(path) or "."
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    os.close(fd)
    os.unlink(temp)
