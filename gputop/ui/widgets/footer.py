"""Textual's key footer, without the keys it leaves behind each time the bindings change.

``Footer`` rebuilds its ``FooterKey`` widgets whenever a screen's bindings change (``refresh_bindings``), and each
key binds its ``compact`` to the footer's (``data_bind``), which stores ``(key, setter)`` among the footer's own
watchers. Textual drops such an entry only when the watched value changes (``Reactive._check_watchers``), and a
footer's ``compact`` never does: every rebuild kept the old keys, their styles and message queues alive for as
long as the footer lived (Textualize/textual#6666). The dashboard rebuilds its footer whenever the training panel
moves to another process, so a dashboard left open over processes that come and go grew without end (43.5 MiB
in 11 minutes at a 0.1 s interval with processes turning over every 5 s: ``benchmarks/soak.py``).
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter

WATCHERS = "__watchers"
"""Where Textual keeps an object's watchers (``textual.reactive._watch``): name -> [(watching node, callback)]."""


class Footer(TextualFooter):
    """``textual.widgets.Footer`` that forgets the watchers of the keys a rebuild removed."""

    async def recompose(self) -> None:
        await super().recompose()
        self.drop_removed_watchers()

    def drop_removed_watchers(self) -> None:
        """Forget the watchers held for widgets that were removed: what Textual does itself on the next change of
        the watched value, which for a footer never comes."""
        watchers: dict[str, list[tuple[object, object]]] = getattr(self, WATCHERS, {})
        for entries in watchers.values():
            entries[:] = [(node, callback) for node, callback in entries if not getattr(node, "_closing", False)]
