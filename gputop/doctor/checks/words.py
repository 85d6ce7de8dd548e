"""The words the checks share: GPU indices as spans, counts with their noun, the fix for a reason without one."""

from __future__ import annotations

from collections.abc import Iterable

GENERIC_FIX = "see the reason above; nvidia-smi -q shows the same value, and a newer driver may answer it"
"""The fix for a reason doctor has no words of its own for: every limit gets a fix line."""


def spans(numbers: Iterable[int]) -> str:
    """``0–3, 5, 7–8``: sorted, runs collapsed."""
    values = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for n in [*values, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = n
    return ", ".join(parts)


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"
