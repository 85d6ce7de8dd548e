"""Textual's footer, rebuilt only when the keys it shows change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


class KeyFooter(Footer):
    """``Footer`` that skips a rebuild when its keys are the ones already shown.

    Textual's footer makes all its key widgets again on every refresh of the bindings (a focus change, a screen
    pushed or resumed, a key's availability), each new widget styled from scratch: a handful of times while the
    dashboard starts, for the same keys every time.
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
