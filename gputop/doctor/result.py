"""What ``gputop doctor`` found: one ``Check`` per subject, each with its verdict, facts and advice.

Pure data (imports nothing of gputop), so the rendering is tested with plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

from gputop.frozen import immutable

Verdict = Literal["ok", "info", "limited", "blocked", "skipped"]
"""``ok``: nothing to do; ``info``: nothing to do, but gputop shows less here for a reason no one can change (the
hardware has no such counter, NVML gives none in MIG mode): information, not a limit, so it has no fix;
``limited``: gputop works but shows less, and each ``advice`` line says how to get it back; ``blocked``: gputop
cannot monitor the GPUs at all; ``skipped``: not checked, because a check it needs blocked."""
OK: Final = "ok"
INFO: Final = "info"
LIMITED: Final = "limited"
BLOCKED: Final = "blocked"
SKIPPED: Final = "skipped"

SEVERITY: Mapping[Verdict, int] = MappingProxyType({OK: 0, INFO: 0, SKIPPED: 0, LIMITED: 1, BLOCKED: 2})

FORMAT_VERSION = 1
"""``"doctor"`` in the JSON document: raised only when a key is removed or changes meaning (docs/doctor.md)."""

Fact: TypeAlias = "str | int | float | bool | list[Fact] | dict[str, Fact] | None"
"""A value of a check's ``facts``: what JSON can hold."""

_NO_FACTS: Mapping[str, Fact] = MappingProxyType({})


@immutable
class Check:
    """One subject checked: ``id`` is stable (the JSON key scripts match on), ``summary`` one line, ``details``
    the lines that back it, ``advice`` what to do about each limit (empty when there is nothing to do), ``info``
    what gputop cannot show here for a reason that cannot be changed (never with a fix)."""

    id: str
    title: str
    verdict: Verdict
    summary: str
    details: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    facts: Mapping[str, Fact] = field(default_factory=lambda: _NO_FACTS)
    info: tuple[str, ...] = ()


@immutable
class Report:
    """Every check, in the order they ran."""

    checks: tuple[Check, ...]

    @property
    def verdict(self) -> Verdict:
        """The worst verdict of any check (``skipped`` counts as ``ok``: the check that caused it is worse; so
        does ``info``: what cannot be changed does not limit gputop)."""
        worst: Verdict = OK
        for check in self.checks:
            if SEVERITY[check.verdict] > SEVERITY[worst]:
                worst = check.verdict
        return worst

    @property
    def exit_status(self) -> int:
        """0 when gputop can monitor this machine (limits included), 1 when something blocks it."""
        return 1 if self.verdict == BLOCKED else 0

    @property
    def blocking(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.verdict == BLOCKED)

    @property
    def informing(self) -> tuple[Check, ...]:
        """The checks whose verdict is ``info``."""
        return tuple(c for c in self.checks if c.verdict == INFO)
