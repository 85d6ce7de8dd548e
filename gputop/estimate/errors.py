"""The one exception the estimate raises, and what the user's code raised, told in one line."""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterator


class EstimateError(Exception):
    """The estimate could not be made: the message says what failed and where, in one line."""


@contextlib.contextmanager
def users_code(failed: Callable[[BaseException], str]) -> Iterator[None]:
    """Around the user's code (the model's module, its factory, its batch function, its forward pass, a custom
    step): whatever it raises becomes an ``EstimateError`` reading ``failed(exc)`` then ``describe(exc)``. That
    includes ``SystemExit`` (an ``exit()`` in the model's code must not end the estimate's caller, nor a command
    with status 0) and other ``BaseException``\\ s. ``KeyboardInterrupt`` passes: it is Ctrl-C, the caller's."""
    try:
        yield
    except (EstimateError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise EstimateError(f"{failed(exc)}{describe(exc)}") from exc


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


def raised_where(exc: BaseException) -> str | None:
    """Where the user's code raised ``exc``: ``file:line`` of the innermost frame of its traceback outside torch,
    gputop and Python's own library (relative to the current directory when below it); None when there is none."""
    skipped = [os.path.dirname(os.path.dirname(__file__)), sysconfig.get_paths()["stdlib"]]
    torch = sys.modules.get("torch")
    if torch is not None and torch.__file__:
        skipped.append(os.path.dirname(torch.__file__))
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        path = os.path.abspath(frame.f_code.co_filename)
        if not any(path.startswith(root + os.sep) for root in skipped) and not path.startswith("<"):
            found = f"{_shown(path)}:{line}"
    return found


def _shown(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith(os.pardir) else relative


def first_line(text: str) -> str:
    """The first non-empty line of a message (PyTorch's run over many lines), stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
