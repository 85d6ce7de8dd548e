"""Reading /proc/PID/stat: one file read gives every per-tick fact about a process.

psutil would read three files per process per tick (stat, status, statm) and re-check the start time before
several calls; with dozens of GPU processes and their workers that is most of a snapshot's cost. The fields
that change every tick come from here, the ones that do not (user, command line) from psutil, once.
"""

from __future__ import annotations

import os

from gputop.frozen import immutable
from gputop.sanitize import printable

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# The one-letter states of proc(5), in psutil's words so both sources agree.
STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "Z": "zombie",
    "T": "stopped",
    "t": "tracing-stop",
    "X": "dead",
    "x": "dead",
    "K": "wake-kill",
    "W": "waking",
    "I": "idle",
    "P": "parked",
}


@immutable
class ProcStat:
    """The per-tick fields of /proc/PID/stat, in plain units."""

    name: str
    status: str
    ppid: int
    cpu_ticks: int
    num_threads: int
    start_ticks: int
    rss_bytes: int


def parse_stat(text: str) -> ProcStat:
    """Parse the text of /proc/PID/stat. The name sits in parentheses and may itself hold spaces or ')'."""
    close = text.rindex(")")
    # Any user can name a process anything (prctl PR_SET_NAME, the file name it runs): escapes made visible here.
    name = printable(text[text.index("(") + 1 : close])
    fields = text[close + 2 :].split()
    # fields[0] is proc(5)'s field 3 (state): field N is fields[N - 3].
    return ProcStat(
        name=name,
        status=STATES.get(fields[0], fields[0]),
        ppid=int(fields[1]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
        num_threads=int(fields[17]),
        start_ticks=int(fields[19]),
        rss_bytes=int(fields[21]) * PAGE_SIZE,
    )


READ_BYTES = 4096


def read_proc_text(path: str) -> str:
    """The text of a small /proc file, undecodable bytes replaced."""
    return read_proc_bytes(path).decode(errors="replace")


def read_proc_bytes(path: str) -> bytes:
    """The bytes of a small /proc file. Through ``os.open`` and ``os.read``: a buffered file object costs a third
    more per read, and a tick reads one file per process (2,000 on a busy node)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, READ_BYTES)]
        while len(chunks[-1]) == READ_BYTES:  # a stat line is a few hundred bytes; anything longer is read whole
            chunks.append(os.read(fd, READ_BYTES))
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_stat(pid: int) -> ProcStat:
    """Read one process's stat file. Raises FileNotFoundError or ProcessLookupError once the process is gone."""
    return parse_stat(read_proc_text(f"/proc/{pid}/stat"))
