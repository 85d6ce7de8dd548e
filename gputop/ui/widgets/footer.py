"""Textual's key footer, rebuilt only when the keys it shows change, and without the keys it leaves behind.

``Footer`` rebuilds its ``FooterKey`` widgets whenever a screen's bindings change (``refresh_bindings``), and each
key binds its ``compact`` to the footer's (``data_bind``), which stores ``(key, setter)`` among the footer's own
watchers. Textual drops such an entry only when the watched value changes (``Reactive._check_watchers``), and a
footer's ``compact`` never does: every rebuild kept the old keys, their styles and message queues alive for as
long as the footer lived (Textualize/textual#6666). The dashboard rebuilds its footer whenever the training panel
moves to another process, so a dashboard left open over processes that come and go grew without end (43.5 MiB
in 11 minutes at a 0.1 s interval with processes turning over every 5 s: ``benchmarks/soak.py``).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer as TextualFooter

WATCHERS = "__watchers"
"""Where Textual keeps an object's watchers (``textual.reactive._watch``): name -> [(watching node, callback)]."""


class Footer(TextualFooter):
    """``textual.widgets.Footer`` that skips a rebuild when its keys are the ones already shown, and forgets the
    watchers of the keys a rebuild removed.

    Textual's footer makes all its key widgets again on every refresh of the bindings (a focus change, a screen
    pushed or resumed, a key's availability), each new widget styled from scratch: a handful of times while the
    dashboard starts, and at every move of the training panel to another process, for the same keys every time.
    """

    _shown: object = None
    """What the last build showed (``_keys``); None before the first build with the bindings ready."""
    _pending = False

    def _keys(self) -> object:
        active = self.screen.active_bindings.values()
        return tuple((b.key, b.action, b.description, on, tooltip) for _, b, on, tooltip in active if b.show)

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self._pending or (self._shown is not None and screen is self.screen and self._keys() == self._shown):
            return
        self._pending = self.is_attached and screen is self.screen and screen.app.app_focus
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        self._pending = False
        if self._bindings_ready:
            self._shown = self._keys()
        yield from super().compose()

    async def recompose(self) -> None:
        await super().recompose()
        self.drop_removed_watchers()

    def drop_removed_watchers(self) -> None:
        """Forget the watchers held for widgets that were removed: what Textual does itself on the next change of
        the watched value, which for a footer never comes."""
        watchers: dict[str, list[tuple[object, object]]] = getattr(self, WATCHERS, {})
        for entries in watchers.values():
            entries[:] = [(node, callback) for node, callback in entries if not getattr(node, "_closing", False)]
