"""The key help, read from the bindings themselves so it cannot fall behind them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeAlias

from textual.binding import Binding, BindingType


class HelpRow(NamedTuple):
    """A line of the key help that stands for keys without a tooltip of their own (the cursor keys)."""

    keys: str
    what: str


HelpGroup: TypeAlias = "Sequence[BindingType | HelpRow]"
"""The bindings of one screen, widget or app, in their order, with any ``HelpRow`` where it belongs."""


def key_help(groups: Iterable[HelpGroup], allowed: Callable[[str], bool]) -> list[tuple[str, str]]:
    """``(keys, what they do)`` for every binding with a tooltip, in the order of ``groups``. An action is listed
    once, for its first binding (a key that replaces another's action comes first); an action that ``allowed``
    refuses is left out."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for group in groups:
        for item in group:
            if isinstance(item, HelpRow):
                rows.append((item.keys, item.what))
                continue
            if not isinstance(item, Binding) or not item.tooltip or item.action in seen:
                continue  # no tooltip: cursor keys, summed up in a HelpRow
            seen.add(item.action)
            if allowed(item.action):
                rows.append((item.key_display or item.key, item.tooltip))
    return rows
