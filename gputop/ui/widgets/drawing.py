"""Helpers for widgets that draw their own lines: cached theme styles, and Rich text straight to strips."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip

if TYPE_CHECKING:
    from textual.widget import Widget

    _Base = Widget
else:
    _Base = object


class CachedComponentStyles(_Base):
    """A mixin for widgets: ``component_style`` is ``get_component_rich_style`` with a cache.

    A plain mixin (not a ``Widget`` subclass), so it adds no CSS type of its own to the widgets that use it.

    Looking a component style up costs about a millisecond; a GPU card needs seven per redraw. The cache is
    dropped whenever Textual re-applies styles (theme change, focus, hover), so it never goes stale.
    """

    _style_lookups: dict[tuple[str, bool], Style] | None = None
    style_generation = 0
    """Counts style changes, for caches of drawn lines to key on."""

    @property
    def inner_size(self) -> Size:
        """``content_size`` as the last layout left it, read without asking the compositor where the widget is.

        ``size`` and ``content_size`` look the widget up in the compositor's map; right after a layout (a filter
        typed, a panel shown) the first look-up arranges every widget of the screen again, which with 64 GPU
        cards costs as much as the layout itself."""
        outer = self.outer_size
        gutter = self.styles.gutter
        return Size(max(0, outer.width - gutter.width), max(0, outer.height - gutter.height))

    def base_style(self) -> Style:
        """The widget's own ``rich_style`` (its colours and background), cached the same way."""
        return self.component_style("", False)

    def component_style(self, name: str, partial: bool = False) -> Style:
        """The style of component class ``name``; ``partial`` keeps only its foreground (no background), for
        parts of a line drawn over another background such as the cursor row."""
        if self._style_lookups is None:
            self._style_lookups = {}
        key = (name, partial)
        style = self._style_lookups.get(key)
        if style is None:
            if not name:
                looked_up = self.rich_style
            else:
                looked_up = self.get_component_rich_style(name)
                if partial:
                    # Textual's own partial lookup cannot blend a translucent colour (``$text-disabled``) without
                    # the background: blend with it, then keep only the foreground and text attributes.
                    looked_up = Style(color=looked_up.color, bold=looked_up.bold, italic=looked_up.italic)
            style = self._style_lookups[key] = looked_up
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_lookups = None
        self.style_generation += 1


def text_strip(line: Text, width: int, base: Style, console: Console) -> Strip:
    """One line of Rich text as a strip ``width`` cells wide over the ``base`` style (colours, background).

    Skips Textual's general path for renderables (measuring, wrapping, padding), which is most of a redraw's
    cost when every line of every GPU card changes on every tick.
    """
    # Text.render leaves the text's own base style out of its segments: put it under them here.
    under = base + console.get_style(line.style) if line.style else base
    segments = [Segment(text, under + style if style else under) for text, style, _ in line.render(console)]
    if line.cell_len < width:
        segments.append(Segment(" " * (width - line.cell_len), base))
    return Strip(segments, max(width, line.cell_len)).simplify()


class TextLines(CachedComponentStyles):
    """A mixin for widgets that draw a few lines of Rich text: through ``text_strip``, redrawn only when
    ``text_key()`` (what the lines depend on), the width or the styles change.
    """

    _drawn: tuple[object, list[Strip]] = (None, [])

    def text_key(self) -> object:
        """Equal keys draw equal lines."""
        raise NotImplementedError

    def text_lines(self, width: int) -> list[Text]:
        raise NotImplementedError

    def drawn_lines(self) -> list[Strip]:
        width = self.inner_size.width
        key = (self.text_key(), width, self.style_generation)
        if self._drawn[0] != key:
            base = self.base_style()
            lines = self.text_lines(width) if width > 0 else []
            self._drawn = (key, [text_strip(line, width, base, self.app.console) for line in lines])
        return self._drawn[1]

    def repaint_changed_lines(self, before: list[Strip]) -> None:
        """Repaint just the lines that differ from ``before`` (the lines drawn until now); all of them, and the
        layout, when the number of lines changed. A tick that changes one number repaints one line, not the panel."""
        after = self.drawn_lines()
        if len(after) != len(before):
            self.refresh(layout=True)
            return
        width = self.inner_size.width
        for y, (was, now) in enumerate(zip(before, after)):
            if was != now:
                self.refresh(Region(0, y, width, 1))

    def line_count_at(self, width: int) -> int:
        """How many lines the text takes at content ``width``. The layout asks before the widget has that width
        (a panel shown for the first time is still 0 wide): counted at the width asked, not the current one."""
        if width == self.inner_size.width:
            return len(self.drawn_lines())
        return len(self.text_lines(width)) if width > 0 else 0

    def render_line(self, y: int) -> Strip:
        lines = self.drawn_lines()
        return lines[y] if y < len(lines) else Strip.blank(self.inner_size.width, self.base_style())
