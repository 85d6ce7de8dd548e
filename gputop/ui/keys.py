"""The key help, read from the bindings themselves so it cannot fall behind them; and what to say of a key that
did nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def bound_keys(groups: Iterable[HelpGroup]) -> dict[str, str]:
    """Every key the bindings of ``groups`` name (each of ``a,b``), as Textual names a pressed key, with the
    description of its first binding."""
    keys: dict[str, str] = {}
    for group in groups:
        for binding in Binding.make_bindings(item for item in group if not isinstance(item, HelpRow)):
            keys.setdefault(binding.key, binding.description)
    return keys


def unbound_words(key: str, display: str, known: Mapping[str, str]) -> str:
    """What to say of ``key`` (shown as ``display``) when it did nothing: that gputop has no such key, or, for a
    key of another screen or one that does not apply now (``l`` without a training process), that it does not
    apply here."""
    if re.fullmatch(r"f\d+", display):
        display = display.upper()
    if key not in known:
        return f"{display} is not a gputop key · ? lists every key"
    what = f" ({known[key]})" if known[key] else ""
    return f"{display}{what} does not apply here now · ? lists every key"
