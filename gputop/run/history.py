"""What ``gputop run`` remembers of the last run of a command: its summary (``gputop.compare.summary``), one small
file per job and working directory in the user's state directory, so that the next run of the same job can say
in one line what changed and whether the advisor's suggestion was followed (docs/training.md, "Since the last
run").

The file holds a command line, which may carry secrets: its directory is made private (0700), the file is
written private (0600) to a fresh name and renamed into place, and never through a symlink. Read back, it is
trusted no more than any other file: it must be a regular file of this user's, small, and every value in it is
checked (``gputop.compare.decode``). Nothing here may fail the run: a file that cannot be read is left out, one
that cannot be written is said in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from gputop.codec.bounds import parse
from gputop.compare.changes import job_of
from gputop.compare.decode import SUMMARY_FORMAT, summary_from_json, summary_to_json
from gputop.compare.summary import RunSummary
from gputop.files import PRIVATE, replace_file

VERSION = 1
MAX_BYTES = 256 * 1024
"""The most a kept summary may be; a real one is about 2 KB."""
PRIVATE_DIR = 0o700


class Unreadable(Exception):
    """A kept summary that is there but cannot be trusted: the message is one line."""


def state_dir(environ: dict[str, str] | None = None) -> Path:
    """Where the summaries are kept: ``$XDG_STATE_HOME/gputop/runs``, or ``~/.local/state/gputop/runs`` where it is
    unset or not an absolute path (the XDG Base Directory rule)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "gputop" / "runs"


def key_of(command: str, cwd: str) -> str:
    """The file name of a job's summary: a hash of its working directory and its job (``job_of``: the program and
    its script, its arguments left out, so a run with ``--workers 7`` follows one with ``--workers 1``)."""
    return hashlib.sha256(f"{cwd}\0{job_of(command)}".encode(errors="surrogateescape")).hexdigest()[:32] + ".json"


def recall(path: Path, command: str, cwd: str) -> RunSummary | None:
    """The summary kept at ``path`` for this job and directory; None where there is none. ``Unreadable`` for a
    file that is there but not a regular file of this user's, too big, or not a summary gputop wrote."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise Unreadable(f"{path} is not a private file of this user's: left alone")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise Unreadable(f"{path} is over {MAX_BYTES >> 10} KiB: not a run's summary")
    try:
        kept = parse(data)
        if not isinstance(kept, dict) or kept.get("format") != SUMMARY_FORMAT or kept.get("version") != VERSION:
            raise ValueError("not a run's summary of this gputop")
        if kept.get("cwd") != cwd or kept.get("job") != job_of(command):
            return None  # another job whose name hashed alike
        return summary_from_json(kept.get("summary"))
    except ValueError as exc:
        raise Unreadable(f"{path}: {exc}") from None


def keep(path: Path, summary: RunSummary, command: str, cwd: str) -> None:
    """Keep ``summary`` at ``path``, replacing the last one: the directories made private where they are new, the
    file written private and renamed into place. Raises OSError (a directory that is not private to this user
    included)."""
    directory = path.parent
    directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise PermissionError(f"{directory} is not a directory private to this user")
    document = {"format": SUMMARY_FORMAT, "version": VERSION, "cwd": cwd, "job": job_of(command)}
    document["summary"] = summary_to_json(summary)
    replace_file(path, json.dumps(document, separators=(",", ":")).encode(), PRIVATE)
