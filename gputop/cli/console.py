"""What gputop's commands write on the console besides their output: ``gputop: ...`` lines on stderr, the
message for a missing Textual, and SIGTERM and Ctrl-C turned into a request to stop that a command reads between
two pieces of work."""

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
    """A second SIGTERM arrived inside ``stop_signals``: stop now, as for a second Ctrl-C."""


class StopRequest:
    """Set by SIGTERM or Ctrl-C inside ``stop_signals``; the command reads ``requested`` between two pieces of
    work and stops there. A plain attribute, not a ``threading.Event``: a handler that took a lock could find it
    held by the very code it interrupted."""

    def __init__(self) -> None:
        self.requested = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            return
        # Asked twice: whatever the command is stuck in, stop it now.
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated


@contextlib.contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """Within the block, the first SIGTERM or Ctrl-C only sets ``requested`` on the ``StopRequest`` it yields, so
    the command ends between two snapshots, never inside a lock or a commit; a second one raises (``Terminated``,
    ``KeyboardInterrupt``). The handlers from before are restored after it."""
    stop = StopRequest()
    previous = {signum: signal.signal(signum, stop._handle) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
