"""``gputop doctor``'s two outputs, from a ``Report`` alone: text for people, a JSON document for scripts.

Pure: tested with plain values. The JSON document's shape is documented in docs/doctor.md.
"""

from __future__ import annotations

from typing import Any

from gputop.doctor.result import BLOCKED, FORMAT_VERSION, LIMITED, Check, Report
from gputop.sanitize import printable

TAG_WIDTH = len("[limited]") + 1
INDENT = " " * TAG_WIDTH


def check_to_dict(check: Check) -> dict[str, Any]:
    return {
        "id": check.id,
        "title": check.title,
        "verdict": check.verdict,
        "summary": check.summary,
        "details": list(check.details),
        "advice": list(check.advice),
        "info": list(check.info),
        "facts": dict(check.facts),
    }


def report_to_dict(report: Report, version: str) -> dict[str, Any]:
    """The JSON document: format version, gputop's version, the overall verdict and exit status, every check."""
    return {
        "doctor": FORMAT_VERSION,
        "gputop_version": version,
        "verdict": report.verdict,
        "exit_status": report.exit_status,
        "checks": [check_to_dict(c) for c in report.checks],
    }


def render_check(check: Check) -> list[str]:
    """A check as lines: its verdict and title with the summary, the details below it, what cannot be changed,
    then each advice."""
    lines = [f"{'[' + check.verdict + ']':<{TAG_WIDTH}}{printable(check.title)}: {printable(check.summary)}"]
    lines += [f"{INDENT}  {printable(d)}" for d in check.details]
    lines += [f"{INDENT}  info: {printable(i)}" for i in check.info]
    lines += [f"{INDENT}  fix: {printable(a)}" for a in check.advice]
    return lines


def conclusion(report: Report) -> str:
    limited = [c.title for c in report.checks if c.verdict == LIMITED]
    informing = [c.title for c in report.informing]
    noted = f"; information only, nothing to fix: {', '.join(informing)}" if informing else ""
    if report.verdict == BLOCKED:
        blocking = ", ".join(c.title for c in report.checks if c.verdict == BLOCKED)
        return f"blocked: gputop cannot monitor the GPUs here ({blocking}); see the fix lines above"
    if limited:
        return (
            f"limited: gputop monitors this machine, with {len(limited)} limit{'s' if len(limited) != 1 else ''} "
            f"({', '.join(limited)}); the fix lines say how to lift each{noted}"
        )
    return f"ok: nothing limits gputop here{noted}"


def render_text(report: Report) -> str:
    lines: list[str] = []
    for check in report.checks:
        lines += render_check(check)
    lines += ["", conclusion(report)]
    return "\n".join(lines) + "\n"
