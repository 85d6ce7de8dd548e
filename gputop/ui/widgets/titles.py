"""Border titles as plain text.

Textual reads a ``str`` border title as markup, and the titles hold names from outside (a GPU's name from the
driver or a remote host, a process's name, a host's name): ``[/x]`` in one raised MarkupError and took the
dashboard down, ``[link=…]`` made a link. A ``Content`` is never parsed, so the name is shown as it is.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget


def set_border_title(widget: Widget, text: str) -> None:
    """Show ``text`` as ``widget``'s border title, unless it already does (each assignment repaints)."""
    title = Content(text)
    if widget.border_title != title.markup:
        widget.border_title = title


def set_border_subtitle(widget: Widget, text: str) -> None:
    """Show ``text`` as ``widget``'s border subtitle, unless it already does."""
    subtitle = Content(text)
    if widget.border_subtitle != subtitle.markup:
        widget.border_subtitle = subtitle
