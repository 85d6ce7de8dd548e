"""The terminal driver: Textual's, except that a terminal that has gone away cannot wedge the dashboard, and that
input is waited for, not polled.

When the terminal hangs up (its window closed, tmux killed, the ssh link dropped), every write to it fails with
EIO. Textual's writer thread dies on the first such error, and the next write, or the writer's stop at exit,
then waits forever on its full queue: ``gputop run`` (which outlives the hang-up to wait for its job and write
its report) would never get past the dashboard. Writes to a terminal that is gone are dropped instead.

Textual's input thread wakes every 0.1 s whether a key came or not, and at exit waits out that wake-up and then
another 0.1 s with nothing to wait on: a tenth of the dashboard's CPU while nobody types, and 0.1 to 0.2 s between
``q`` and the end. Here it sleeps until a key comes, the parser's own deadline (a lone Esc is told from the start
of a sequence by a timeout) or a wake-up on a pipe of its own at exit.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import selectors
import sys
import threading
from codecs import getincrementaldecoder
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


_POLL_S = 0.1
"""Textual's own poll of the terminal, where the parser's deadline cannot be read."""


@functools.cache
def driver_class() -> type[Driver] | None:
    """The driver for ``App(driver_class=...)``: None (Textual's choice) except on Linux and macOS, where it is
    Textual's own driver writing through ``_Gone``. ``TEXTUAL_DRIVER`` in the environment still wins."""
    from textual import constants

    if sys.platform == "win32" or constants.DRIVER is not None:
        return None
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    from textual.drivers.linux_driver import LinuxDriver

    class HangupSafeDriver(LinuxDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if self._file is not None:
                # Textual types _file as sys.__stderr__ (a TextIOWrapper) yet only hands it to its WriterThread,
                # which takes any text stream.
                self._file = cast("io.TextIOWrapper", _Gone(self._file))
            self._closing = threading.Event()
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            os.set_blocking(self._wake_write, False)

        def start_application_mode(self) -> None:
            """Textual's; its input thread starts again after a suspend (``ctrl+z``), with no wake-up pending."""
            self._closing.clear()
            with contextlib.suppress(OSError):
                while os.read(self._wake_read, 64):
                    pass
            super().start_application_mode()

        def disable_input(self) -> None:
            """Textual's, with the input thread woken at once instead of at its next poll."""
            self._closing.set()
            with contextlib.suppress(OSError):  # a full pipe is a wake-up pending already
                os.write(self._wake_write, b"x")
            super().disable_input()

        def close(self) -> None:
            super().close()
            for end in (self._wake_read, self._wake_write):
                with contextlib.suppress(OSError):
                    os.close(end)

        def run_input_thread(self) -> None:
            """Read the terminal and hand on what the parser makes of it until input is disabled; between keys,
            sleep until the next key, the parser's deadline for a sequence begun (a lone Esc), or the wake-up."""
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            fileno = self.fileno
            with selectors.DefaultSelector() as selector:
                selector.register(fileno, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                try:
                    while not self._closing.is_set() and not self.exit_event.is_set():
                        deadline = getattr(parser, "_timeout_time", _POLL_S)
                        if deadline is _POLL_S:  # a Textual that keeps the deadline elsewhere: poll as it does
                            timeout: float | None = _POLL_S
                        else:
                            timeout = None if deadline is None else max(0.0, deadline - get_time())
                        for key, _ in selector.select(timeout):
                            if key.fd != fileno:
                                continue  # the wake-up: the loop's test ends it
                            data = os.read(fileno, 4096)
                            if not data:  # the end of a piped input: nothing more will come
                                return
                            text = decode(data)
                            for message in parser.feed(text) if text else ():
                                self.process_message(message)
                        for message in parser.tick():
                            self.process_message(message)
                finally:
                    with contextlib.suppress(Exception):  # a sequence cut short at the end: nothing to hand on
                        for _ in parser.feed(""):
                            pass

    return HangupSafeDriver
