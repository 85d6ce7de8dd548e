"""Text from outside made safe for a terminal: control characters shown, never obeyed.

Process names, command lines, user names, GPU names, remote hosts' output and recording contents are written
by other people. A C0 or C1 control character in them (ESC starting a sequence that clears the screen or sets the
window title, BEL, the 8-bit CSI ``\\x9b``) would be obeyed by the terminal of whoever runs gputop; bidirectional
overrides would make a command line read differently from what it is. Each such character becomes visible text
(``\\x1b``, ``\\u202e``), so what is shown is what is there, and the result is safe whatever it passes through.
"""

from __future__ import annotations

import re

# C0 (tab and newline included: one field is one line), DEL, C1, and the Unicode format characters that
# reorder or hide text: bidirectional embeddings, overrides and isolates, zero-width and invisible marks, the
# line and paragraph separators, the byte order mark; and lone surrogates (JSON's "\ud800"), which cannot even be
# encoded for a terminal.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff\ufff9-\ufffb]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control and reordering character replaced by its escape, shown as written."""
    if text.isprintable():
        return text  # the common case (every character this replaces is unprintable), without a regex pass
    return _UNSAFE.sub(_visible, text)


def printable_or_none(text: str | None) -> str | None:
    return None if text is None else printable(text)
