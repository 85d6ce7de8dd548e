"""Text meters shared by the GPU cards, the host panel and the detail screen.

A meter is full blocks on a light-shade track, so its length reads without colour (NO_COLOR, monochrome
terminals, screenshots); colour only adds emphasis. An unreadable value draws an empty track, never a zero bar.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text

FILLED = "█"
TRACK = "░"


def meter(fraction: float | None, width: int, style: Style | str = "", track_style: Style | str = "") -> Text:
    """A horizontal bar ``width`` cells long, ``fraction`` (0..1) of it filled."""
    if width <= 0:
        return Text()
    filled = 0 if fraction is None else round(min(1.0, max(0.0, fraction)) * width)
    bar = Text(FILLED * filled, style=style)
    bar.append(TRACK * (width - filled), style=track_style)
    return bar


def core_columns(percents: tuple[float, ...]) -> str:
    """One block character per CPU core, its height the core's load: 64 cores fit in 64 cells.

    An idle core is the lowest block rather than a blank, so every core is visibly there.
    """
    levels = "▁▂▃▄▅▆▇█"
    return "".join(levels[min(7, int(p / 100 * 8))] for p in percents)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis, or padded to it; counted in terminal cells, so a name in
    wide characters (a remote host's user, a GPU's name) keeps the columns after it in line."""
    if width <= 0:
        return ""
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    return set_cell_size(text, width)
