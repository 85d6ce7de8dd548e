"""The one exception the estimate raises, and what the user's code raised, told in one line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class EstimateError(Exception):
    """The estimate could not be made: the message says what failed and where, in one line."""


@contextlib.contextmanager
def users_code(failed: Callable[[], str]) -> Iterator[None]:
    """Around the user's code (the model's module, its factory, its batch function, its forward pass, a custom
    step): whatever it raises becomes an ``EstimateError`` reading ``failed()`` then ``describe(exc)``. That
    includes ``SystemExit`` (an ``exit()`` in the model's code must not end the estimate's caller, nor a command
    with status 0) and other ``BaseException``\\ s. ``KeyboardInterrupt`` passes: it is Ctrl-C, the caller's."""
    try:
        yield
    except (EstimateError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise EstimateError(f"{failed()}{describe(exc)}") from exc


def describe(exc: BaseException) -> str:
    """What an exception is, in a few words: ``ValueError: the first line of its message``, its class alone when
    it has no message (or one that cannot be read), ``SystemExit(3): the model's code asked to exit``."""
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        code = exc.code
        if isinstance(code, str) and first_line(code):
            return f"{name}: {first_line(code)}"
        status = f"({code})" if isinstance(code, int) and not isinstance(code, bool) else ""
        return f"{name}{status}: the model's code asked to exit"
    try:
        message = first_line(str(exc))
    except Exception:  # the user's __str__ may raise too
        message = ""
    return f"{name}: {message}" if message else name


def first_line(text: str) -> str:
    """The first non-empty line of a message (PyTorch's run over many lines), stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
