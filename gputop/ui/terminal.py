"""The terminal driver: Textual's, except that a terminal that has gone away cannot wedge the dashboard.

When the terminal hangs up (its window closed, tmux killed, the ssh link dropped), every write to it fails with
EIO. Textual's writer thread dies on the first such error, and the next write, or the writer's stop at exit,
then waits forever on its full queue: ``gputop run`` (which outlives the hang-up to wait for its job and write
its report) would never get past the dashboard. Writes to a terminal that is gone are dropped instead.
"""

from __future__ import annotations

import functools
import io
import sys
from typing import IO, Any, cast

from textual.driver import Driver


class _Gone:
    """A text stream whose write and flush drop their text once the terminal behind it fails."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self.failed = True
        return len(text)

    def flush(self) -> None:
        if not self.failed:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.failed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@functools.cache
def driver_class() -> type[Driver] | None:
    """The driver for ``App(driver_class=...)``: None (Textual's choice) except on Linux and macOS, where it is
    Textual's own driver writing through ``_Gone``. ``TEXTUAL_DRIVER`` in the environment still wins."""
    from textual import constants

    if sys.platform == "win32" or constants.DRIVER is not None:
        return None
    from textual.drivers.linux_driver import LinuxDriver

    class HangupSafeDriver(LinuxDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if self._file is not None:
                # Textual types _file as sys.__stderr__ (a TextIOWrapper) yet only hands it to its WriterThread,
                # which takes any text stream.
                self._file = cast("io.TextIOWrapper", _Gone(self._file))

    return HangupSafeDriver
