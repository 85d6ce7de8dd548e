"""How a run speaks on the terminal: the command line's own ``gputop: ...`` lines, handed down to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Console:
    """``gputop.cli.console``'s functions: the run sits below the command line and is given them."""

    say: Callable[[str], None]
    """``gputop: message`` on stderr."""
    tell: Callable[[str], None]
    """Text on stderr as it is."""
    error: Callable[[str, int], int]
    """``gputop: error: message`` on stderr; returns the exit status given."""
