"""The one typed way from a screen (or a widget of one) to the dashboard app it runs in."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from gputop.ui.app import GputopApp

    _Node = DOMNode
else:
    _Node = object


class InGputopApp(_Node):
    """A mixin for the screens and widgets that only ``GputopApp`` mounts: ``gputop`` is ``self.app`` as that app.

    Textual types every node's ``app`` as ``App[object]``; the cast that says which app it is lives here, once. A
    plain mixin (not a ``DOMNode`` subclass), listed before the Textual base, so it adds no CSS type and does not
    come between a screen and the CSS and bindings it inherits. The app's type is imported for the checker only:
    the app imports its first screen, so a runtime import here would close a loop."""

    @property
    def gputop(self) -> GputopApp:
        return cast("GputopApp", self.app)
