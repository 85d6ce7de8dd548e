"""Small pieces of panel text shared by the training and advice panels: labels, N/A with its reason, and parts
flowed onto as many lines as a width needs."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from gputop.formatting import NA
from gputop.model import PIN_OFF, PIN_ON
from gputop.ui.text.gpu import Palette

LABEL_CELLS = 12
"""The label column of the training panel: ``MAIN THREAD`` and a space."""
PART_GAP = "  "


def label(text: str, p: Palette, cells: int = LABEL_CELLS) -> Text:
    """A section label padded to the label column (``cells=0``: no padding)."""
    # A span, not the Text's own style: that would run under everything appended after it.
    return Text().append(text.ljust(cells) if cells else text, style=p.label)


def na(reason: str | None, p: Palette) -> Text:
    """``N/A (reason)``, dimmed: an unknown value says why, and never reads as a zero."""
    return Text(f"{NA} ({reason})" if reason else NA, style=p.dim)


def pin_words(state: str, p: Palette) -> tuple[str, Style]:
    """The pin_memory state and its style: on is good, off is worth a look, unknown is dim."""
    return state, p.fill if state == PIN_ON else p.warn if state == PIN_OFF else p.dim


def flow(head: Text, parts: Sequence[Text], width: int, indent: int = LABEL_CELLS) -> list[Text]:
    """``head`` followed by ``parts`` separated by two spaces, wrapped onto lines indented by ``indent`` cells.

    A part never breaks in the middle unless it is wider than a whole line, where it is cut with an ellipsis.
    """
    lines = [head.copy()]
    for part in parts:
        line = lines[-1]
        gap = PART_GAP if line.cell_len > indent and line.plain.strip() else ""
        if line.cell_len + len(gap) + part.cell_len > width and line.cell_len > indent:
            line = Text(" " * indent)
            lines.append(line)
            gap = ""
        line.append(gap)
        line.append_text(part)
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines
