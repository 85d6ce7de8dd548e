"""Two runs compared, as text (``gputop report A B``), as a JSON document (``--json``), and as the one line
``gputop run`` ends with when it ran the same command before."""

from __future__ import annotations

from typing import Any

from gputop.breakdown import PART_NAMES
from gputop.compare.changes import Comparison, Row, compare
from gputop.compare.decode import summary_to_json
from gputop.compare.summary import SETTINGS, RunSummary, Setting
from gputop.formatting import NA, aligned, fmt_bytes, short_command

SCHEMA = 1
GROUPS = {
    "settings": "DataLoader",
    "throughput": "Throughput",
    "step": "Step (time per step)",
    "memory": "Memory",
    "cost": "Cost",
}
_STATE_WORDS = {"gone": "gone", "new": "new", "still": "still there"}


def fmt_value(row: Row, value: Setting | float) -> str:
    """One side of a row, in the unit its measure calls for."""
    if value is None:
        return NA
    if isinstance(value, bool) or row.measure == "setting":
        return str(value)
    if row.measure == "share" or row.measure == "fraction":
        return f"{value * 100:.{0 if row.measure == 'share' else 1}f}%"
    if row.measure == "bytes":
        return fmt_bytes(value)
    if row.measure == "seconds":
        return f"{value * 1000:.1f} ms"
    if row.measure == "joules":
        return f"{value:.3g} J"
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def fmt_ratio(ratio: float) -> str:
    return f"×{ratio:.2f}" if ratio < 1 else f"×{ratio:.1f}" if ratio < 10 else f"×{ratio:.0f}"


def fmt_change(row: Row) -> str:
    """How B differs from A: ``×5.4``, ``-84 points``, ``+1.2 GiB``, ``same``; empty where it cannot be said."""
    if not row.changed:
        return "same"
    if row.ratio is not None:
        return fmt_ratio(row.ratio)
    if row.points is not None:
        return f"{row.points:+.{0 if row.measure == 'share' else 1}f} points"
    if row.difference is not None:
        return ("+" if row.difference >= 0 else "-") + fmt_bytes(abs(row.difference))
    return ""


def _name(row: Row) -> str:
    return PART_NAMES.get(row.name, row.name) if row.group == "memory" else row.name


def _describe(label: str, run: RunSummary) -> str:
    what = {"recording": "recording", "report": "--report-json document", "run": "run"}[run.kind]
    process = f"PID {run.pid}" if run.pid is not None else "its training process"
    if run.process_note:
        process += f" ({run.process_note})"
    over = "its last view" if run.kind == "report" else f"median of {run.snapshots} snapshots"
    if not run.steady:
        over += ", start-up included (shorter than the advisor's window)"
    return f"{label}: {run.source} ({what}), {process}, {over}"


def render_comparison(comparison: Comparison) -> str:
    """The comparison as text: the two runs, each group's rows as A → B and the change, then the findings."""
    a, b = comparison.a, comparison.b
    lines = [_describe("A", a), _describe("B", b)]
    if a.command and b.command and a.command != b.command:
        lines += [f"   A ran {short_command(a.command)}", f"   B ran {short_command(b.command)}"]
    elif a.command or b.command:
        lines.append(f"   both ran {short_command(a.command or b.command or '')}")
    for group, title in GROUPS.items():
        rows = [row for row in comparison.rows if row.group == group]
        if not rows:
            continue
        lines += ["", title]
        table = [
            ["  " + _name(row), fmt_value(row, row.a), "→", fmt_value(row, row.b), fmt_change(row)] for row in rows
        ]
        lines += [line.rstrip() for line in aligned(table, {1})]
    lines += ["", "Findings"]
    if not comparison.findings:
        lines.append("  none in either run")
    for change in comparison.findings:
        finding = change.finding
        lines.append(f"  {_STATE_WORDS[change.state]:<12}{finding.id}: {finding.title}")
    return "\n".join(lines) + "\n"


def _row_json(row: Row) -> dict[str, Any]:
    out: dict[str, Any] = {"group": row.group, "name": row.name, "a": row.a, "b": row.b, "changed": row.changed}
    if row.ratio is not None:
        out["ratio"] = round(row.ratio, 4)
    if row.points is not None:
        out["points"] = round(row.points, 2)
    if row.difference is not None:
        out["difference"] = row.difference
    return out


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """``gputop report A B --json`` (docs/recording.md): each run's summary, every row, every finding's state."""
    return {
        "schema": SCHEMA,
        "a": summary_to_json(comparison.a),
        "b": summary_to_json(comparison.b),
        "changes": [_row_json(row) for row in comparison.rows],
        "findings": [
            {"id": c.finding.id, "title": c.finding.title, "severity": c.finding.severity, "state": c.state}
            for c in comparison.findings
        ],
    }


def since_last_run(previous: RunSummary, current: RunSummary) -> str:
    """One line: what changed since the last run of the same command, led by the setting the advisor suggested
    then where it was applied, or what it suggested where it was not; then samples/s and the data wait."""
    comparison = compare(previous, current)
    suggested = {name: value for name, value in previous.suggested.items() if name in SETTINGS}
    changed = [row for row in comparison.rows if row.group == "settings" and row.changed]
    said = []
    for row in sorted(changed, key=lambda row: row.name not in suggested):
        told = suggested.get(row.name)
        mark = "" if told is None else " (suggested)" if row.b == told else f" ({told} suggested)"
        said.append(f"{row.name} {row.a} → {row.b}{mark}")
    moved = {row.name for row in changed}
    ignored = [
        (name, value) for name, value in suggested.items() if name not in moved and current.setting(name) != value
    ]
    if ignored:
        told = ", ".join(f"{name}={value}" for name, value in ignored)
        ran = ", ".join(str(current.setting(name)) for name, _ in ignored)
        said.append(f"the last run was told {told}; this one ran with {ran}")
    if not said:
        said.append("no DataLoader setting changed")
    effects = []
    samples, wait = comparison.row("samples/s"), comparison.row("data wait")
    if samples is not None and samples.ratio is not None:
        effects.append(f"samples/s {fmt_ratio(samples.ratio)}")
    if wait is not None and wait.a is not None and wait.b is not None:
        effects.append(f"data wait {fmt_value(wait, wait.a)} → {fmt_value(wait, wait.b)}")
    line = "since the last run of this command: " + "; ".join(said)
    return line + (": " + ", ".join(effects) if effects else "")
