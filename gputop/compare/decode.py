"""A run's summary as JSON and back, and from a ``gputop run --report-json`` document.

Both come from files that may have been written by someone else, or changed since (a report copied from another
machine, a summary kept in the state directory): every value read is checked for its type and range, every text
bounded and made printable, and anything else is a ``ValueError`` whose message is one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from gputop.compare.summary import MEMORY_PARTS, SETTINGS, FindingSeen, Kind, RunSummary, Setting
from gputop.model import PHASES, SEVERITIES, Severity
from gputop.sanitize import printable

MAX_TEXT = 4096
"""The longest text kept from a document (a command line, a title)."""
MAX_FINDINGS = 100
MAX_BYTES = 2**64 - 1
MAX_RATE = 1e12
_RULE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_SUGGEST_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
SUMMARY_FORMAT = "gputop-run-summary"


# -- checked reads ----------------------------------------------------------------------------------------------


def _object(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return cast("Mapping[str, Any]", value)


def _list(value: object, what: str, most: int) -> Sequence[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    if len(value) > most:
        raise ValueError(f"{what} holds over {most} entries")
    return value


def _number(value: object, what: str, high: float) -> float | None:
    """A finite number from 0 to ``high``, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} is not a number")
    if not 0 <= value <= high:
        raise ValueError(f"{what} is out of range")
    return float(value)


def _int(value: object, what: str, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ValueError(f"{what} is not a count from 0 to {high}")
    return value


def _text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValueError(f"{what} is not a text of at most {MAX_TEXT} characters")
    return printable(value)


def _setting(value: object, what: str) -> Setting:
    """A DataLoader setting: a boolean or a count."""
    if value is None or isinstance(value, bool):
        return value
    return _int(value, what, 2**31)


def _settings(found: Mapping[str, Any], what: str) -> tuple[tuple[str, Setting], ...]:
    return tuple((name, _setting(found.get(name), f"{what}.{name}")) for name in SETTINGS)


def _phases(value: object, what: str) -> tuple[tuple[str, float], ...]:
    """Each phase's seconds per step, from an object (``{"data": 0.07}``) or the pairs a training view's JSON
    holds (``[["data", 0.07]]``), in the probe's order."""
    if isinstance(value, list):
        pairs = _list(value, what, len(PHASES))
        if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in pairs):
            raise ValueError(f"{what} is not a list of [phase, seconds]")
        value = dict(pairs)
    found = _object(value, what)
    phases = []
    for phase in PHASES:
        seconds = _number(found.get(phase), f"{what}.{phase}", 1e6)
        if seconds is not None:
            phases.append((phase, seconds))
    return tuple(phases)


def _findings(entries: object, what: str) -> tuple[FindingSeen, ...]:
    seen: dict[str, FindingSeen] = {}
    for i, entry in enumerate(_list(entries, what, MAX_FINDINGS)):
        where = f"{what}[{i}]"
        finding = _object(entry, where)
        rule = finding.get("id")
        if not isinstance(rule, str) or not _RULE_ID.fullmatch(rule):
            raise ValueError(f"{where}.id is not a rule's id")
        severity = finding.get("severity")
        if severity not in SEVERITIES:
            raise ValueError(f"{where}.severity is not one of {', '.join(SEVERITIES)}")
        title = _text(finding.get("title"), f"{where}.title") or rule
        suggest: list[tuple[str, int | float | str | bool]] = []
        for name, value in _object(finding.get("suggest") or {}, f"{where}.suggest").items():
            if not _SUGGEST_NAME.fullmatch(name) or len(suggest) >= len(SETTINGS) * 4:
                raise ValueError(f"{where}.suggest names no setting")
            suggest.append((name, _suggested(value, f"{where}.suggest.{name}")))
        seen.setdefault(rule, FindingSeen(rule, title, cast("Severity", severity), tuple(suggest)))
    return tuple(seen.values())


def _suggested(value: object, what: str) -> int | float | str | bool:
    """A suggested value: a boolean, a text, or a number (an integer kept as one)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _text(value, what) or ""
    number = _number(value, what, MAX_RATE)
    if number is None:
        raise ValueError(f"{what} is null")
    return int(number) if number.is_integer() else number


# -- the summary's own JSON -------------------------------------------------------------------------------------


def summary_to_json(summary: RunSummary) -> dict[str, Any]:
    """The summary as a JSON object: what ``gputop report A B --json`` shows of each run, and what a run keeps."""
    return {
        "source": summary.source,
        "kind": summary.kind,
        "command": summary.command,
        "pid": summary.pid,
        "process_note": summary.process_note,
        "snapshots": summary.snapshots,
        "steady": summary.steady,
        "settings": dict(summary.settings),
        "steps_per_s": summary.steps_per_s,
        "samples_per_s": summary.samples_per_s,
        "data_wait_share": summary.data_wait_share,
        "phases_s": dict(summary.phases_s),
        "memory_bytes": dict(summary.memory),
        "mfu": summary.mfu,
        "energy_per_sample_j": summary.energy_per_sample_j,
        "findings": [
            {"id": f.id, "title": f.title, "severity": f.severity, "suggest": dict(f.suggest)} for f in summary.findings
        ],
    }


def summary_from_json(value: object) -> RunSummary:
    """A summary written by ``summary_to_json``, every value checked; ``ValueError`` for anything else."""
    found = _object(value, "the summary")
    kind = found.get("kind")
    if kind not in ("recording", "report", "run"):
        raise ValueError("the summary's kind is not recording, report or run")
    steady = found.get("steady")
    if not isinstance(steady, bool):
        raise ValueError("the summary's steady is not a boolean")
    memory = _object(found.get("memory_bytes"), "memory_bytes")
    return RunSummary(
        source=_text(found.get("source"), "source") or "?",
        kind=cast("Kind", kind),
        command=_text(found.get("command"), "command"),
        pid=_int(found.get("pid"), "pid", 2**31),
        process_note=_text(found.get("process_note"), "process_note"),
        snapshots=_int(found.get("snapshots"), "snapshots", 2**40) or 0,
        steady=steady,
        settings=_settings(_object(found.get("settings"), "settings"), "settings"),
        steps_per_s=_number(found.get("steps_per_s"), "steps_per_s", MAX_RATE),
        samples_per_s=_number(found.get("samples_per_s"), "samples_per_s", MAX_RATE),
        data_wait_share=_number(found.get("data_wait_share"), "data_wait_share", 1.0),
        phases_s=_phases(found.get("phases_s"), "phases_s"),
        memory=tuple((part, _int(memory.get(part), f"memory_bytes.{part}", MAX_BYTES)) for part in MEMORY_PARTS),
        mfu=_number(found.get("mfu"), "mfu", 10.0),
        energy_per_sample_j=_number(found.get("energy_per_sample_j"), "energy_per_sample_j", 1e9),
        findings=_findings(found.get("findings"), "findings"),
    )


# -- a --report-json document -----------------------------------------------------------------------------------


def is_report_document(value: object) -> bool:
    """Whether a JSON value is shaped as ``gputop run --report-json`` writes it (it is checked as it is read)."""
    return isinstance(value, dict) and value.get("schema") == 1 and "training" in value and "advice" in value


def summary_from_report(value: object, source: str) -> RunSummary | None:
    """The summary of a ``--report-json`` document: its training process's last view (rank 0 of several ranks)
    and its findings; None where it holds no training process. ``ValueError`` for a document that is not one."""
    if not is_report_document(value):
        raise ValueError("not a gputop run --report-json document (no schema 1, training and advice)")
    document = _object(value, "the document")
    words = _list(document.get("command", []), "command", 10_000)
    if not all(isinstance(word, str) for word in words):
        raise ValueError("command is not a list of texts")
    command = _text(" ".join(words), "command") if words else None
    views = [_object(v, f"training[{i}]") for i, v in enumerate(_list(document["training"], "training", 4096))]
    training = [v for v in views if v.get("role") == "training" and v.get("evidence")]
    if not training:
        return None
    view, note = _chosen(training)
    where = f"the training view of PID {view.get('pid')}"
    probe = _object(view.get("probe") or {}, f"{where}: probe")
    loader = _active_loader(_list(probe.get("loaders") or [], "loaders", 256))
    step = _object(probe.get("step") or {}, "probe.step")
    cost = _object(view.get("cost") or {}, "cost")
    settings: tuple[tuple[str, Setting], ...] = tuple((name, None) for name in SETTINGS)
    steps = _number(step.get("steps_per_s"), "step.steps_per_s", MAX_RATE)
    samples = _number(step.get("samples_per_s"), "step.samples_per_s", MAX_RATE)
    wait = None
    if loader is not None:
        effective = _settings(_object(loader.get("effective") or {}, "effective"), "effective")
        requested = _settings(_object(loader.get("requested") or {}, "requested"), "requested")
        settings = tuple((name, e if e is not None else r) for (name, e), (_, r) in zip(effective, requested))
        loader_steps = _number(loader.get("steps_per_s"), "steps_per_s", MAX_RATE)
        loader_samples = _number(loader.get("samples_per_s"), "samples_per_s", MAX_RATE)
        steps = loader_steps if steps is None else steps
        samples = loader_samples if samples is None else samples
        wait = _number(loader.get("data_wait_share"), "data_wait_share", 1.0)
    return RunSummary(
        source=source,
        kind="report",
        command=command,
        pid=_int(view.get("pid"), "pid", 2**31),
        process_note=note,
        snapshots=1,
        steady=True,
        settings=settings,
        steps_per_s=steps,
        samples_per_s=samples,
        data_wait_share=wait,
        phases_s=_phases(step.get("phases_s") or {}, "step.phases_s"),
        memory=_memory(view, probe),
        mfu=_number(cost.get("mfu"), "cost.mfu", 10.0),
        energy_per_sample_j=_number(cost.get("energy_per_sample_j"), "cost.energy_per_sample_j", 1e9),
        findings=_findings(document["advice"], "advice"),
    )


def _chosen(views: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], str | None]:
    """Rank 0 of several ranks, else the first training view."""
    for view in views:
        launch = view.get("launch")
        if isinstance(launch, dict) and launch.get("rank") == 0:
            world = _int(launch.get("world_size"), "launch.world_size", 2**20) or 0
            if world > 1:
                return view, f"rank 0 of {world}"
    note = f"the first training process, of {len(views)}" if len(views) > 1 else None
    return views[0], note


def _active_loader(loaders: Sequence[Any]) -> Mapping[str, Any] | None:
    """The loader whose last batch is the most recent, as ``ProbeReport.active_loader`` picks it."""
    best, best_age = None, math.inf
    for i, entry in enumerate(loaders):
        loader = _object(entry, f"loaders[{i}]")
        age = _number(loader.get("last_batch_age_s"), f"loaders[{i}].last_batch_age_s", 1e12)
        age = math.inf if age is None else age
        if best is None or age < best_age:
            best, best_age = loader, age
    return best


def _memory(view: Mapping[str, Any], probe: Mapping[str, Any]) -> tuple[tuple[str, int | None], ...]:
    devices = [_object(d, "memory[]") for d in _list(view.get("memory") or [], "memory", 256)]
    found: list[tuple[str, int | None]] = []
    for part in MEMORY_PARTS[:3]:
        sizes = [_int(_object(d.get("parts") or {}, "parts").get(part), f"parts.{part}", MAX_BYTES) for d in devices]
        known = [size for size in sizes if size is not None]
        found.append((part, sum(known) if devices and len(known) == len(sizes) else None))
    cuda = [_object(c, "cuda[]") for c in _list(probe.get("cuda") or [], "cuda", 256)]
    peaks = [_int(c.get("allocated_peak_bytes"), "cuda.allocated_peak_bytes", MAX_BYTES) for c in cuda]
    known_peaks = [peak for peak in peaks if peak is not None]
    found.append(("peak", sum(known_peaks) if cuda and len(known_peaks) == len(peaks) else None))
    return tuple(found)
