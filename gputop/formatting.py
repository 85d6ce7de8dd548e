"""How gputop writes values for people: sizes, shares, durations and clock times. Pure and fast.

Every view (the dashboard, the hosts view, replay, ``--once``, ``gputop report``) and the advisor's messages
format through these, so a value reads the same everywhere. A value that could not be read is ``N/A``.
"""

from __future__ import annotations

import re
import time

NA = "N/A"

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units with three significant figures at most: 512B, 1.50KiB, 80.0GiB, 123MiB."""
    if n is None:
        return NA
    if abs(n) < 1024:
        return f"{int(n)}B"
    for unit in _BYTE_UNITS[1:]:
        n /= 1024
        if abs(n) < 1024 or unit == _BYTE_UNITS[-1]:
            break
    digits = 0 if abs(n) >= 100 else 1 if abs(n) >= 10 else 2
    return f"{n:.{digits}f}{unit}"


def fmt_count(n: int | None) -> str:
    """A count in decimal units with three significant figures at most: 950, 2.76K, 124M, 1.30B."""
    if n is None:
        return NA
    if abs(n) < 1000:
        return str(n)
    value = float(n)
    for unit in ("K", "M", "B", "T"):
        value /= 1000
        if abs(value) < 999.5 or unit == "T":
            break
    digits = 0 if abs(value) >= 99.5 else 1 if abs(value) >= 9.995 else 2
    return f"{value:.{digits}f}{unit}"


def counted(n: int | None, noun: str, many: str | None = None) -> str:
    """``1 worker``, ``2 workers``, ``13,408 batches`` (``many``: the plural where it is not ``noun`` + s);
    ``N/A threads`` for a count that could not be read."""
    if n is None:
        return f"{NA} {many or noun + 's'}"
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def short_command(command: str) -> str:
    """A command line as a narrow column shows it: the program by its base name, then the arguments, so a venv's
    ``/home/alice/project/.venv/bin/python train.py`` reads ``python train.py`` and the script stays in sight; a
    Python interpreter's script goes by its base name too (``python3 /srv/jobs/train.py`` reads
    ``python3 train.py``). The whole line stays where there is room for it (the detail screen, ``--json``).

    A command line is its arguments joined by spaces, so a program whose path holds a space is cut at the first.
    """
    if command.startswith("["):
        return command
    program, space, arguments = command.partition(" ")
    name = program.rpartition("/")[2] or program
    if _PYTHON.fullmatch(name):
        arguments = _short_script(arguments)
    return name + space + arguments


_PYTHON = re.compile(r"(python|pypy)[0-9.]*")
_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})


def _short_script(arguments: str) -> str:
    """The interpreter's arguments with its script's path cut to the base name: options before the script are
    kept (``-u``, ``-W ignore``); ``-m`` and ``-c`` name no script file."""
    words = arguments.split(" ")
    i = 0
    while i < len(words) and words[i].startswith("-"):
        if words[i] in ("-m", "-c") or words[i].startswith(("-m", "-c")):
            return arguments
        i += 2 if words[i] in _OPTIONS_WITH_VALUE else 1
    if i < len(words) and words[i].endswith(".py") and "/" in words[i]:
        words[i] = words[i].rpartition("/")[2] or words[i]
    return " ".join(words)


def fmt_percent(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def fmt_number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return NA if value is None else f"{value:.{digits}f}{unit}"


def aligned(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows of text in columns, those in ``right`` aligned right: ``--once``'s table, ``gputop estimate``'s. Every
    row has as many cells as the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


# -- lengths of time ---------------------------------------------------------------------------------------------


def fmt_span(seconds: float) -> str:
    """A length of time to the second, as the recording tools write it: ``45s``, ``12m05s``, ``1h02m03s``."""
    s = int(max(0.0, seconds) + 1e-6)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{s:02d}s"
    if minutes:
        return f"{minutes}m{s:02d}s"
    return f"{s}s"


def fmt_length(seconds: float) -> str:
    """A recording's length, shorter from an hour up: ``45s``, ``12m05s``, ``1h00m``."""
    s = int(max(0.0, seconds) + 0.5)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return fmt_span(s)


def fmt_duration(seconds: float | None) -> str:
    """Elapsed time as ps does it: 59s, 12:03, 3:04:05, 2-03:04:05."""
    if seconds is None:
        return NA
    s = int(max(0, seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{s:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{s:02d}"
    if minutes:
        return f"{minutes}:{s:02d}"
    return f"{s}s"


def fmt_age(seconds: float) -> str:
    """``4s``, ``12m``, ``3h``, ``2d``: how long ago, to the unit that matters."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


# -- clock times ------------------------------------------------------------------------------------------------


def fmt_clock(at: float, with_date: bool = False, hundredths: bool = False) -> str:
    """The local wall-clock time of ``at`` (seconds since the epoch): ``14:03:07``, with the date in front
    (``2026-05-17 14:03:07``) or hundredths of a second behind (``14:03:07.25``)."""
    text = time.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.localtime(at))
    return text + f".{int(at % 1 * 100):02d}" if hundredths else text
