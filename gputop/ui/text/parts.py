"""Small pieces of panel text shared by the training and advice panels: labels, N/A with its reason, and parts
flowed onto as many lines as a width needs."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
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

    A part that fits on a line is never broken: it moves to the next line whole. One wider than a line (a hint
    that says how to fix something) starts where it is and breaks between words onto the lines below, so none of
    it is lost; only a single word wider than a line is cut, with an ellipsis.
    """
    lines = [head.copy()]
    full = width - indent
    for part in parts:
        line = lines[-1]
        gap = PART_GAP if line.cell_len > indent and line.plain.strip() else ""
        room = width - line.cell_len - len(gap)
        if part.cell_len > room and line.cell_len > indent and (part.cell_len <= full or _first_word(part) > room):
            line = Text(" " * indent)
            lines.append(line)
            gap, room = "", full
        pieces = _between_words(part, room, full)
        line.append(gap)
        line.append_text(pieces[0])
        for piece in pieces[1:]:
            lines.append(Text(" " * indent).append_text(piece))
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def _first_word(part: Text) -> int:
    return cell_len(part.plain.split(" ", 1)[0])


def _between_words(part: Text, first: int, rest: int) -> list[Text]:
    """``part`` broken at spaces into pieces of at most ``first`` cells, then ``rest`` cells each (its styles kept).
    A word longer than its piece's room stays whole, for the caller to cut."""
    plain = part.plain
    cuts: list[int] = []
    start, room = 0, first
    while cell_len(plain[start:]) > room:
        cut = plain.rfind(" ", start + 1, start + room + 1)
        if cut == -1:
            break
        cuts.append(cut)
        start, room = cut + 1, rest
    if not cuts:
        return [part]
    pieces = part.divide([at for cut in cuts for at in (cut, cut + 1)])
    return list(pieces)[::2]  # every other piece is the space it broke at
