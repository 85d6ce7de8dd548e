"""What gputop's commands write on the console besides their output: ``gputop: ...`` lines on stderr, the
message for a missing Textual, and SIGTERM turned into an exception that ends a command cleanly."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType

from gputop.sanitize import printable


def tell(text: str) -> None:
    """Write to stderr; a terminal that has hung up (EIO) or a closed pipe loses the text, not the command."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def say(message: str) -> None:
    """``gputop: message`` on stderr."""
    tell(f"gputop: {message}\n")


def error(message: str, status: int = 2) -> int:
    """``gputop: error: message`` on stderr, control characters in it shown, not obeyed (argparse repeats what was
    typed); returns ``status``, the exit status for it."""
    tell(f"gputop: error: {printable(message)}\n")
    return status


def needs_textual(exc: ImportError, what: str, hint: str = "") -> int:
    """After ``exc`` importing a Textual view: says that ``what`` needs Textual and returns exit status 1, or
    raises ``exc`` again when what is missing is not Textual (or Rich) but a bug."""
    if (exc.name or "").split(".")[0] not in ("textual", "rich"):
        raise exc
    return error(f"{what} needs Textual (pip install textual){hint}", 1)


class Terminated(Exception):
    """SIGTERM arrived (inside ``sigterm_raises``): stop as for Ctrl-C, cleaning up on the way out."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` on the main thread, so ``finally`` clauses run (commit
    what is pending, close the file); the handler from before is restored after it."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
