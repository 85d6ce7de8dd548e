"""The text of the advisor's findings: one line each for the dashboard, and in full for the training screen.

Severity is a word as well as a colour (``CRIT``, ``WARN``, ``INFO``), so it reads without colour (NO_COLOR).
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from gputop.formatting import NA, fmt_bytes
from gputop.model import CRITICAL, WARNING, Advice
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


def brief_lines(
    advice: Sequence[Advice], width: int, p: Palette, show_pid: bool, limit: int | None = None
) -> list[Text]:
    """One line per finding, most urgent first: mark, title and the suggested settings; at most ``limit`` lines,
    the last of them then saying how many more there are."""
    shown = list(advice)
    hidden = 0
    if limit is not None and len(shown) > limit:
        shown, hidden = shown[: max(0, limit - 1)], len(shown) - max(0, limit - 1)
    lines = []
    for item in shown:
        line = mark(item, p)
        if show_pid:
            line.append(f"PID {item.pid}{'+' if item.pids else ''}  ", style=p.label)
        tail = Text()
        if item.suggest:
            tail.append("  → ", style=p.label).append(item.suggest_text, style="bold")
        # The change to make matters more than the end of the title: the title gives way first.
        room = width - line.cell_len - tail.cell_len
        title = Text(item.title)
        if room >= 12:
            title.truncate(room, overflow="ellipsis")
        line.append_text(title).append_text(tail)
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    if hidden:
        lines.append(Text(f"{'':{INDENT}}… {hidden} more: l shows every finding in full", style=p.dim))
    return lines


def _wrapped(text: str, width: int, style: Style | str, first: str = "") -> list[Text]:
    body = textwrap.wrap(text, max(10, width - INDENT - len(first)), break_on_hyphens=False) or [""]
    out = []
    for n, chunk in enumerate(body):
        lead = " " * INDENT + (first if n == 0 else " " * len(first))
        out.append(Text(lead) + Text(chunk, style=style))
    return out


def full_lines(advice: Sequence[Advice], width: int, p: Palette) -> list[Text]:
    """Every finding in full: title, the measurements in words, the change to make, the settings, the evidence as
    numbers, and which rule, process and source it comes from."""
    lines: list[Text] = []
    for item in advice:
        if lines:
            lines.append(Text())
        head = mark(item, p)
        head.append(item.title, style="bold")
        lines.append(head)
        lines += _wrapped(item.detail, width, p.dim)
        lines += _wrapped(item.action, width, "", first="→ ")
        if item.suggest:
            lines.append(Text(" " * INDENT) + Text("suggest ", style=p.label) + Text(item.suggest_text, style="bold"))
        evidence = " · ".join(f"{name} {evidence_value(name, value)}" for name, value in item.evidence.items())
        if evidence:
            lines += _wrapped(evidence, width, p.dim, first="evidence: ")
        since = time.strftime("%H:%M:%S", time.localtime(item.since))
        lines.append(Text(f"{'':{INDENT}}{item.id} · {who(item)} · from {item.source} · since {since}", style=p.dim))
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def who(item: Advice) -> str:
    """``PID 4242``, or for a finding that holds for several processes ``PIDs 4242, 4243 of job 3f9c01ab``."""
    words = f"PID {item.pid}" if not item.pids else "PIDs " + ", ".join(map(str, item.pids))
    return words + (f" of job {item.job}" if item.job else "")
