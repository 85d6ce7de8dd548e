"""The argument types and checks that gputop's commands share.

Errors in the arguments are one line on stderr and exit 2, never a traceback or a usage dump: ``Parser.error``
raises ``UsageError``, which ``gputop.cli.main`` reports.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from gputop.limits import MAX_PID, MAX_SECONDS, MIN_INTERVAL_S, MIN_WINDOW_S

if TYPE_CHECKING:
    from gputop.advisor import AdvisorConfig

WINDOW_HELP = "how long a condition must hold before it is reported (default 20)"
"""The advisor's ``DEFAULT_WINDOW_S``, spelled out: importing the advisor here would slow every start of gputop."""

REPORT_SECONDS = 60.0
"""How long ``gputop report --pid`` watches a live job without ``--seconds``."""


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see gputop --help)")


# float() also takes other scripts' digits, underscores, spaces, 'nan' and 'infinity': only plain decimals here.
_DECIMAL = re.compile(r"[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?", re.ASCII)


def number(text: str, what: str) -> float:
    """``text``, a plain decimal number (``2``, ``0.5``, ``1e3``), as a float."""
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}")
    return float(text)


def interval(text: str) -> float:
    """Seconds between two snapshots: at least ``MIN_INTERVAL_S``, at most a day."""
    value = number(text, "a number of seconds")
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_S} seconds, got {text}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:.0f} seconds (a day), got {text}")
    return value


def positive_int(what: str, most: int) -> Callable[[str], int]:
    """An argparse type for whole numbers from 1 to ``most`` in ASCII digits, named ``what`` in its error."""

    def parse(text: str) -> int:
        # int() takes '١' (Arabic-Indic one), '1_000' and ' 1 ': only plain digits name a process or a count.
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= len(str(most)) else 0
        if not 0 < value <= most:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}")
        return value

    return parse


def seconds(text: str) -> float:
    """A positive number of seconds, at most a day."""
    value = number(text, "a number of seconds")
    if not 0 < value <= MAX_SECONDS:  # also rejects NaN and infinities
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds up to {MAX_SECONDS:.0f}, got {text}")
    return value


def window(text: str) -> float:
    """The advisor's window: from ``MIN_WINDOW_S`` to a day."""
    value = number(text, "a number of seconds")
    if not MIN_WINDOW_S <= value <= MAX_SECONDS:  # also rejects NaN and infinities
        raise argparse.ArgumentTypeError(
            f"must be from {MIN_WINDOW_S:g} to {MAX_SECONDS:.0f} seconds (a day), got {text}"
        )
    return value


_JOB_ID = re.compile(r"[0-9a-f]{1,16}", re.ASCII)


def job_id(text: str) -> str:
    """A job's id as the job view shows it (``gputop.jobs.short_id``): 1 to 16 lowercase hex digits."""
    if not _JOB_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a job id (1 to 16 hex digits, as the job view shows it): {text!r}")
    return text


def slurm_job_id(text: str) -> str:
    """A Slurm job id: a number, an array task ``<job>_<task>`` or a het job component ``<job>+<offset>``."""
    from gputop.collect.slurm import valid_job_id

    if not valid_job_id(text):
        raise argparse.ArgumentTypeError(f"not a Slurm job id (a number, 123_4 or 123+1): {text!r}")
    return text


pid = positive_int(f"a process id (1 to {MAX_PID})", MAX_PID)
count = positive_int("a count of 1 or more", 1_000_000_000)


def check_pid_exists(pid: int) -> None:
    """``UsageError`` unless a process ``pid`` exists."""
    import psutil

    if not psutil.pid_exists(pid):
        raise UsageError(f"no process with PID {pid}")


def add_interval(parser: argparse.ArgumentParser, dest: str, help: str, default: float | None = 1.0) -> None:
    """The ``-d/--interval SECONDS`` option every mode shares, stored under ``dest``."""
    parser.add_argument("-d", "--interval", type=interval, default=default, metavar="SECONDS", dest=dest, help=help)


def advisor_config(window_s: float | None) -> AdvisorConfig:
    """The advisor's settings for a ``--window`` option (None: the default window)."""
    from gputop.advisor import AdvisorConfig

    return AdvisorConfig() if window_s is None else AdvisorConfig(window_s=window_s)


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "kB": 1000,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_SIZE = re.compile(r"([0-9.eE+-]+)\s*([A-Za-z]*)", re.ASCII)


def byte_size(text: str) -> int:
    """A memory size as people write it: ``80GiB``, ``81920MiB``, ``40GB`` (powers of 1000), ``512`` (bytes);
    a positive whole number of bytes."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or match.group(2) not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (as 80GiB, 512MiB or 40GB)")
    value = number(match.group(1), "a size") * _SIZE_UNITS[match.group(2)]
    if not 1 <= value < 2**63:  # also rejects NaN, and less than a byte (0.5, 1e-9GiB)
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (as 80GiB, 512MiB or 40GB)")
    return int(value)
