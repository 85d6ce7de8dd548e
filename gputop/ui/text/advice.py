"""The text of the advisor's findings: one line each for the dashboard, and in full for the training screen.

Severity is a word as well as a colour (``CRIT``, ``WARN``, ``INFO``), so it reads without colour (NO_COLOR).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_bytes, fmt_clock
from gputop.model import CRITICAL, NO_PROCESS, WARNING, Advice
from gputop.ui.text.gpu import Palette

MARKS = {CRITICAL: "CRIT", WARNING: "WARN"}
"""Anything else is ``INFO``."""
INDENT = 6
"""Where a finding's text starts: after its mark and a space."""


def severity_style(severity: str, p: Palette) -> Style:
    return p.crit if severity == CRITICAL else p.warn if severity == WARNING else p.spark


def mark(advice: Advice, p: Palette) -> Text:
    """``CRIT``/``WARN``/``INFO`` in bold and the severity's colour, padded to the text column."""
    style = severity_style(advice.severity, p) + Style(bold=True)
    return Text().append(f"{MARKS.get(advice.severity, 'INFO'):<{INDENT}}", style=style)


def evidence_value(name: str, value: object) -> str:
    """A measurement in the units its name says: ``_share`` as a percentage, ``_bytes`` in binary units..."""
    if value is None:
        return NA
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
    if name.endswith("_bytes_per_s"):
        return fmt_bytes(value) + "/s"
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_share"):
        return f"{value * 100:.0f}%"
    if name.endswith("_percent"):
        return f"{value:.0f}%"
    if name.endswith("_per_s"):
        return f"{value:.3g}/s"
    if name.endswith("_s"):
        return f"{value:.3g} s"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


TITLE_MIN_CELLS = 12
"""The least of a title kept beside the change to make; with less room the change goes on a line of its own."""


def brief_lines(
    advice: Sequence[Advice], width: int, p: Palette, show_pid: bool, limit: int | None = None
) -> list[Text]:
    """A line per finding, most urgent first: mark, title and the suggested settings; at most ``limit`` lines,
    the last of them then saying how many more there are."""
    lines: list[Text] = []
    for n, item in enumerate(advice):
        finding = _brief(item, width, p, show_pid)
        more_after = n + 1 < len(advice)
        if limit is not None and len(lines) + len(finding) + more_after > limit:
            hidden = len(advice) - n
            lines.append(Text(f"{'':{INDENT}}… {hidden} more: l shows every finding in full", style=p.dim))
            break
        lines += finding
    return lines


def _brief(item: Advice, width: int, p: Palette, show_pid: bool) -> list[Text]:
    """One finding in a line, or in two where the change to make does not fit beside enough of the title: the
    change is never cut (it is what the line is for); the title gives way first."""
    line = mark(item, p)
    # a GPU's finding whose title already names it (``GPU 4 is failing``) is not labelled with it again
    named = item.pid == NO_PROCESS and item.title.startswith(item.subject + " ")
    if show_pid and not named:
        line.append(
            f"{item.subject if item.pid == NO_PROCESS else f'PID {item.pid}'}{'+' if item.pids else ''}  ",
            style=p.label,
        )
    change = Text()
    if item.suggest:
        change.append("→ ", style=p.label).append(item.suggest_text, style="bold")
    title = Text(item.title)
    room = width - line.cell_len - (2 + change.cell_len if change else 0)
    if not change or title.cell_len <= room or room >= TITLE_MIN_CELLS:
        title.truncate(max(room, 0), overflow="ellipsis")
        line.append_text(title)
        if change:
            line.append("  ", style=p.label).append_text(change)
        line.truncate(width, overflow="ellipsis")
        return [line]
    line.append_text(title)
    line.truncate(width, overflow="ellipsis")
    below = Text(" " * INDENT).append_text(change)
    below.truncate(width, overflow="ellipsis")
    return [line, below]


def _wrapped(text: str, width: int, style: Style | str, first: str = "", first_style: Style | str = "") -> list[Text]:
    """``text`` at the text column, after ``first`` (``→ ``, ``evidence: ``), broken between words to ``width``."""
    body = textwrap.wrap(text, max(10, width - INDENT - len(first)), break_on_hyphens=False) or [""]
    out = []
    for n, chunk in enumerate(body):
        lead = Text(" " * INDENT).append(first if n == 0 else " " * len(first), style=first_style if n == 0 else "")
        out.append(lead.append(chunk, style=style))
    return out


def full_lines(advice: Sequence[Advice], width: int, p: Palette) -> list[Text]:
    """Every finding in full: title, the measurements in words, the change to make, the settings, the evidence as
    numbers, and which rule, process and source it comes from."""
    lines: list[Text] = []
    for item in advice:
        if lines:
            lines.append(Text())
        title = _wrapped(item.title, width, "bold")
        title[0] = mark(item, p).append_text(title[0][INDENT:])
        lines += title
        lines += _wrapped(item.detail, width, p.dim)
        lines += _wrapped(item.action, width, "", first="→ ")
        if item.suggest:
            lines += _wrapped(item.suggest_text, width, "bold", first="suggest ", first_style=p.label)
        evidence = " · ".join(f"{name} {evidence_value(name, value)}" for name, value in item.evidence.items())
        if evidence:
            lines += _wrapped(evidence, width, p.dim, first="evidence: ")
        since = fmt_clock(item.since)
        origin = _wrapped(f"{item.id} · {who(item)} · from {item.source} · since {since}", width, "")
        for line in origin:
            line.stylize(p.dim)
        lines += origin
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def who(item: Advice) -> str:
    """``PID 4242``, or for a finding that holds for several processes ``PIDs 4242, 4243 of job 3f9c01ab``."""
    return item.subject + (f" of job {item.job}" if item.job else "")
