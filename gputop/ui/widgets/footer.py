"""The key footer: the keys that fit the width (the help key always among them), rebuilt only when what it shows
changes, without the keys it leaves behind; and, for a moment, a word about a key gputop does not know.

``Footer`` rebuilds its ``FooterKey`` widgets whenever a screen's bindings change (``refresh_bindings``), and each
key binds its ``compact`` to the footer's (``data_bind``), which stores ``(key, setter)`` among the footer's own
watchers. Textual drops such an entry only when the watched value changes (``Reactive._check_watchers``), and a
footer's ``compact`` seldom does: every rebuild kept the old keys, their styles and message queues alive for as
long as the footer lived (Textualize/textual#6666). The dashboard rebuilds its footer whenever the training panel
moves to another process, so a dashboard left open over processes that come and go grew without end (43.5 MiB
in 11 minutes at a 0.1 s interval with processes turning over every 5 s: ``benchmarks/soak.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.reactive import Reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer as TextualFooter
from textual.widgets import Label

WATCHERS = "__watchers"
"""Where Textual keeps an object's watchers (``textual.reactive._watch``): name -> [(watching node, callback)]."""
ALWAYS_SHOWN = ("help", "quit")
"""The actions whose keys stay when the footer is too narrow for all: the key that lists the others, and quit."""
NOTE_S = 3.0
"""How long a word about a key stands in the footer."""


class ShownKey(NamedTuple):
    """One key of the footer: what it draws and does."""

    key: str
    display: str
    description: str
    action: str
    enabled: bool
    tooltip: str


Selection: TypeAlias = "str | tuple[bool, tuple[ShownKey, ...]]"
"""What the footer shows: a note, or whether in the compact style and which keys."""


def key_cells(key: ShownKey, compact: bool) -> int:
    """The cells a key takes in Textual's footer: its key and description padded (``FooterKey``'s CSS), and in the
    compact style a cell of margin after it instead (``Footer.-compact``)."""
    description = cell_len(key.description) + 1 if key.description else 0
    return cell_len(key.display) + description + (1 if compact else 2)


def fitted(keys: Sequence[ShownKey], width: int, compact: bool = False) -> tuple[bool, tuple[ShownKey, ...]]:
    """The keys to show in ``width`` cells, and whether in the compact style: all of them in the roomier style when
    they fit, else compact, leaving out keys from the end (never help or quit) until the rest fits."""
    if not compact and sum(key_cells(k, False) for k in keys) <= width:
        return False, tuple(keys)
    shown = list(keys)
    # The compact style's last margin may hang past the edge: it is blank.
    while sum(key_cells(k, True) for k in shown) > width + 1:
        droppable = [n for n, k in enumerate(shown) if k.action not in ALWAYS_SHOWN]
        if not droppable:
            break
        del shown[droppable[-1]]
    return True, tuple(shown)


class Footer(TextualFooter):
    """``textual.widgets.Footer`` that shows the keys that fit its width, skips a rebuild when what it would show is
    already shown, forgets the watchers of the keys a rebuild removed, and can say a word in place of its keys.

    Textual's footer makes all its key widgets again on every refresh of the bindings (a focus change, a screen
    pushed or resumed, a key's availability), each new widget styled from scratch: a handful of times while the
    dashboard starts, and at every move of the training panel to another process, for the same keys every time.
    """

    DEFAULT_CSS = """
    Footer > .footer--note { padding: 0 1; color: $footer-key-foreground; text-style: bold; }
    """

    _shown: Selection | None = None
    """What the last build showed (``_selection``); None before the first build with the bindings ready."""
    _pending = False
    _note = ""
    _note_timer: Timer | None = None

    def __init__(self, compact: bool = False) -> None:
        super().__init__(compact=compact)
        self._always_compact = compact

    def _keys(self) -> list[ShownKey]:
        """The keys the screen shows now, one per action (its first key), in the bindings' order."""
        keys: dict[str, ShownKey] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in keys:
                display = self.app.get_key_display(binding)
                keys[binding.action] = ShownKey(
                    binding.key, display, binding.description, binding.action, enabled, tooltip
                )
        return list(keys.values())

    def _selection(self) -> Selection:
        if self._note:
            return self._note
        return fitted(self._keys(), self.size.width or self.app.size.width, self._always_compact)

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self._pending or (self._shown is not None and screen is self.screen and self._selection() == self._shown):
            return
        self._pending = self.is_attached and screen is self.screen and screen.app.app_focus
        if self._shown is None and self._pending:
            # The first keys: built next, not after the screen's next refresh as Textual's footer waits to, so the
            # dashboard's first frame has its footer (the bindings come before that frame is laid out).
            self._bindings_ready = True
            self.call_next(self.recompose)
            return
        super().bindings_changed(screen)

    def on_resize(self) -> None:
        if self._bindings_ready and not self._pending and self._selection() != self._shown:
            self._pending = True
            self.call_after_refresh(self.recompose)

    def say(self, note: str) -> None:
        """Show ``note`` in place of the keys for ``NOTE_S`` seconds."""
        if self._note_timer is not None:
            self._note_timer.stop()
        self._note_timer = self.set_timer(NOTE_S, lambda: self._set_note(""))
        self._set_note(note)

    def _set_note(self, note: str) -> None:
        if note != self._note:
            self._note = note
            self._pending = True
            self.call_after_refresh(self.recompose)

    def compose(self) -> ComposeResult:
        self._pending = False
        if not self._bindings_ready:
            return
        selection = self._shown = self._selection()
        if isinstance(selection, str):
            yield Label(selection, classes="footer--note", markup=False)
            return
        compact, keys = selection
        self.compact = compact
        actions = {key.action for key in keys}
        # Textual's keys, those that fit: a key left out is never mounted, so it binds nothing.
        for key in super().compose():
            if getattr(key, "action", None) in actions:
                # Made in the footer's style: Textual's key starts compact and takes the footer's style once
                # mounted, each change of class styling it anew (every key twice at every build otherwise).
                style = vars(type(key)).get("compact")
                if isinstance(style, Reactive):
                    key.set_reactive(style, compact)
                    key.set_class(compact, "-compact", update=False)
                yield key

    async def recompose(self) -> None:
        await super().recompose()
        self.drop_removed_watchers()

    def drop_removed_watchers(self) -> None:
        """Forget the watchers held for widgets that were removed: what Textual does itself on the next change of
        the watched value, which for a footer comes seldom."""
        watchers: dict[str, list[tuple[object, object]]] = getattr(self, WATCHERS, {})
        for entries in watchers.values():
            entries[:] = [(node, callback) for node, callback in entries if not getattr(node, "_closing", False)]
