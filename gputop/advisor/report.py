"""Findings as the JSON document (docs/json.md, "Advice") and as text, for ``gputop report`` and ``gputop run``.

The document: ``{"schema": 1, "pid": PID, "advice": [...]}``, one object per finding raised during the watch,
most urgent first, those still active before those that cleared.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from gputop.advisor.process_use import ProcessUse, UseTally, process_use_dict, render_not_training
from gputop.advisor.timeline import AdviceTimeline, Span, advise
from gputop.advisor.window import AdvisorConfig
from gputop.formatting import counted, fmt_clock, fmt_span
from gputop.frozen import immutable
from gputop.model import NO_PROCESS, Advice, Snapshot

SCHEMA = 1
REPORT_EVERY_S = 1.0
WINDOW_SAMPLES = 8
"""Snapshots per window at least: with fewer, one tick weighs too much in a finding's hold."""


def advice_to_dict(advice: Advice, active: bool = True) -> dict[str, Any]:
    """One finding as a JSON object; tuples in the evidence become arrays."""
    return {
        "id": advice.id,
        "severity": advice.severity,
        "title": advice.title,
        "detail": advice.detail,
        "evidence": {k: list(v) if isinstance(v, tuple) else v for k, v in advice.evidence.items()},
        "action": advice.action,
        "suggest": dict(advice.suggest),
        "source": advice.source,
        "pid": advice.pid,
        "pids": list(advice.concerns),
        "job": advice.job,
        "since": advice.since,
        "active": active,
    }


def advice_document(pid: int, raised: Sequence[tuple[Advice, bool]], **extra: Any) -> dict[str, Any]:
    """The findings of a watch of ``pid``; ``extra`` keys follow them (the command, the training views...)."""
    return {"schema": SCHEMA, "pid": pid, "advice": [advice_to_dict(a, active) for a, active in raised], **extra}


def render_advice(raised: Sequence[tuple[Advice, bool]], rules: str | None = None) -> str:
    """The findings as text for a terminal or a log: a headline each, then the measurements, the change.
    ``rules`` names the rules that judged, where not all of them did (a process without training evidence)."""
    if not raised:
        return f"No findings{f' from {rules}' if rules else ''}: nothing held long enough to report.\n"
    lines = []
    for advice, active in raised:
        lines.extend(_headline(advice, active))
        since = fmt_clock(advice.since)
        tail = f"{advice.subject}{f' of job {advice.job}' if advice.job else ''}, from {advice.source}, since {since}"
        if advice.suggest:
            tail = f"suggest {advice.suggest_text}; {tail}"
        lines.append(f"         {tail}")
    return "\n".join(lines) + "\n"


def _headline(advice: Advice, active: bool) -> list[str]:
    """A finding's severity, id and title, then its measurements and the change, as three lines."""
    state = "" if active else " (cleared)"
    return [
        f"{advice.severity.upper():<8} {advice.id}{state}: {advice.title}",
        f"         {advice.detail}",
        f"         → {advice.action}",
    ]


def sample_every_s(config: AdvisorConfig, interval_s: float = REPORT_EVERY_S) -> float:
    """How often to snapshot: every ``interval_s``, or more often where the window would get too few snapshots."""
    return min(interval_s, config.window_s / WINDOW_SAMPLES)


# -- a recording ------------------------------------------------------------------------------------------------


class RecordingFacts(Protocol):
    """What a recording says of itself, as the report shows it (``gputop.store.RecordingInfo`` is one)."""

    @property
    def path(self) -> str: ...
    @property
    def hostname(self) -> str | None: ...
    @property
    def gputop_version(self) -> str | None: ...
    @property
    def interval_s(self) -> float | None: ...
    @property
    def started(self) -> float | None: ...
    @property
    def ended(self) -> float | None: ...


class OpenRecording(Protocol):
    """A recording its caller has opened (``gputop.store.Recording`` is one): its snapshots, read in one pass, and
    after that pass what could not be read."""

    @property
    def info(self) -> RecordingFacts: ...
    @property
    def damage(self) -> str | None: ...
    @property
    def skipped(self) -> int: ...
    def __iter__(self) -> Iterator[Snapshot]: ...


@immutable
class RecordingReport:
    """The advisor over a whole recording: its metadata, the snapshots read, the findings with their spans."""

    info: RecordingFacts
    pid: int | None
    """The job judged: ``--pid``, else the recording's focus (None: every training process)."""
    timeline: AdviceTimeline
    damage: str | None
    skipped: int
    """Rows that hold no snapshot this gputop can read (the wrong types, too big, not a snapshot): left out."""
    use: ProcessUse | None = None
    """What the recording shows of the job judged (None: every training process was judged)."""

    @property
    def first(self) -> float | None:
        return self.timeline.times[0] if self.timeline.times else None

    @property
    def last(self) -> float | None:
        return self.timeline.times[-1] if self.timeline.times else None


def report_recording(recording: OpenRecording, pid: int | None, config: AdvisorConfig) -> RecordingReport:
    """Read ``recording`` once, feeding every snapshot to the advisor; ``pid`` None judges the recording's focus. A
    damaged file gives the findings of what could be read, and ``damage`` says what was not. The caller opens the
    file (``gputop.store.open_recording``): the advisor reads snapshots, not files."""
    snapshots = iter(recording)
    first = next(snapshots, None)
    if pid is None and first is not None:
        pid = first.focus_pid
    fed: Iterator[Snapshot] = itertools.chain([first] if first is not None else [], snapshots)
    tally = None if pid is None else UseTally(pid)
    if tally is not None:
        fed = _tallied(fed, tally)
    timeline = advise(fed, pid, config)
    use = None if tally is None else tally.result()
    return RecordingReport(recording.info, pid, timeline, recording.damage, recording.skipped, use)


def _tallied(snapshots: Iterable[Snapshot], tally: UseTally) -> Iterator[Snapshot]:
    for snap in snapshots:
        tally.add(snap)
        yield snap


def _span_dict(span: Span) -> dict[str, Any]:
    return {"from": span.start, "to": span.end}


def recording_document(report: RecordingReport) -> dict[str, Any]:
    """The JSON document of ``gputop report FILE`` (docs/recording.md): every finding as in ``advice_document``,
    each with ``held`` (its spans, ``to`` null while still active at the end) and ``held_s``."""
    info, last = report.info, report.last
    advice = []
    for finding in report.timeline.findings:
        entry = advice_to_dict(finding.advice, finding.active)
        entry["held"] = [_span_dict(span) for span in finding.spans]
        entry["held_s"] = round(finding.held_s(last or 0.0), 3)
        advice.append(entry)
    return {
        "schema": SCHEMA,
        "recording": {
            "path": info.path,
            "hostname": info.hostname,
            "gputop_version": info.gputop_version,
            "interval_s": info.interval_s,
            "started": info.started,
            "ended": info.ended,
            "first": report.first,
            "last": report.last,
            "snapshots": len(report.timeline),
            "damage": report.damage,
            "skipped": report.skipped,
        },
        "pid": report.pid,
        "process": None if report.use is None else process_use_dict(report.use),
        "advice": advice,
        "advisor_failed": report.timeline.failed,
    }


def render_recording_report(report: RecordingReport) -> str:
    """``gputop report FILE`` as text: what was recorded, then each finding with when it held."""
    info, first, last = report.info, report.first, report.last
    lines = []
    host = f" on {info.hostname}" if info.hostname else ""
    if first is None or last is None:
        lines.append(f"{info.path}: no snapshots{host}")
    else:
        lines.append(
            f"{info.path}: {counted(len(report.timeline), 'snapshot')}{host}, {fmt_clock(first, True)} to "
            f"{fmt_clock(last)} ({fmt_span(last - first)})"
        )
    who = f"PID {report.pid} and the training processes below it" if report.pid else "every training process"
    lines.append(f"Advisor over {who}")
    if info.ended is None:
        lines.append("Note: the recording has no end mark: it is still being written, or its writer was stopped")
    if report.damage:
        lines.append(f"Note: {report.damage}")
    if report.timeline.failed:
        lines.append(f"Note: {report.timeline.failed}; findings up to there")
    lines.append("")
    not_training = report.use is not None and report.use.snapshots > 0 and not report.use.trains
    if not_training and report.use is not None:
        lines.append(render_not_training(report.use).rstrip("\n"))
    if not report.timeline.findings:
        lines.append(render_advice((), "the GPU rules" if not_training else None).rstrip("\n"))
        return "\n".join(lines) + "\n"
    span_of = last - first if first is not None and last is not None and last > first else None
    for finding in report.timeline.findings:
        lines.extend(_headline(finding.advice, finding.active))
        held = finding.held_s(last or 0.0)
        share = f", {held / span_of:.0%} of the recording" if span_of else ""
        spans = ", ".join(
            f"{fmt_clock(s.start)}–{fmt_clock(s.end) if s.end is not None else 'end'}" for s in finding.spans[:6]
        )
        if len(finding.spans) > 6:
            spans += f" and {len(finding.spans) - 6} more"
        times = f"{len(finding.spans)} times: " if len(finding.spans) > 1 else ""
        who = finding.advice.subject if finding.advice.pid == NO_PROCESS else f"PID {finding.advice.pid}"
        lines.append(f"         {who}; held {fmt_span(held)}{share}; {times}{spans}")
        if finding.advice.suggest:
            lines.append(f"         suggest {finding.advice.suggest_text}")
    return "\n".join(lines) + "\n"
