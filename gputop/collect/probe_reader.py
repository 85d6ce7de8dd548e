"""Reading the probe's reports into the model, trusting none of them.

A report is used only when it is a regular file owned by the monitor's own user, in a directory only that user
can enter, parses as the expected format, names the process it is read for (PID and start time, so a PID reused
by a later process does not inherit an old report), and was written recently. Anything else becomes a
``ProbeReport`` whose status says why it was ignored.

What a report holds is checked before any of it is used, in time and memory bounded by its size, which is capped
before it is read: its nesting depth (before parsing: the parser recurses), every value's type and range (no NaN
or infinity, which would make the JSON output invalid; no integer too large for the exporters), the length of
each list, and its strings, which are shown in a terminal, made printable. One bad value rejects the whole
report, never more than that process's report, with two exceptions for the parts that only advice reads: a bad
``step`` (the step's anatomy) is dropped with the reason (``ProbeReport.step_reason``), and a bad loader's
``created_at`` is None with the reason in that loader's ``unavailable``; the rest of the report is used.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any, TypeGuard, get_args

from gputop.collect.launch_env import launch_from
from gputop.model import (
    CODE_SITE,
    PHASES,
    PROBE_FOREIGN,
    PROBE_MALFORMED,
    PROBE_NONE,
    PROBE_OK,
    PROBE_STALE,
    SYNC_CALL,
    TENSOR_DEVICE,
    CudaMemory,
    FlopsSource,
    LoaderConfig,
    LoaderView,
    PinnedHostMemory,
    ProbeReport,
    StepAnatomy,
    StepBoundary,
    StepClock,
    SyncSite,
    TensorMemory,
    frozen_reasons,
)
from gputop.probe import channel
from gputop.sanitize import printable

MAX_REPORT_BYTES = channel.MAX_REPORT_BYTES
STALE_AFTER_S = 5.0
MAX_DEPTH = 16
"""Containers inside containers: the format needs 4 (report, loaders, loader, its configuration)."""
MAX_LOADERS = 64
MAX_DEVICES = 64
MAX_WORKER_PIDS = 1024
MAX_DTYPES = 8
"""Distinct parameter dtypes in a report (the probe sends at most 8)."""
MAX_OPTIMIZERS = 8
MAX_TEXT = 300
"""Characters kept of a string: the probe's longest (``last_failure``) is cut at 300."""
MAX_INT = (1 << 63) - 1
"""Counts and bytes fit a signed 64-bit integer, as the recording and the exporters store them."""
MAX_NUMBER = 1e18
MAX_SYNC_SITES = 32
"""Places in the job's code where the host waited for the GPU, in a report (the probe sends its busiest)."""


class Malformed(ValueError):
    """A report that does not have the expected shape."""


def read_report(
    directory: str,
    pid: int,
    start_ticks: int | None,
    now: float,
    stale_after_s: float = STALE_AFTER_S,
    run_id: str | None = None,
) -> ProbeReport:
    """The report of one process as of ``now`` (Unix time). The caller checks the directory (``unsafe_reason``).

    With ``run_id``, only a report of that ``gputop run`` counts. Never raises.
    """
    path = channel.report_path(directory, pid)
    try:
        data = channel.read_report_bytes(path, owner=os.geteuid())
    except FileNotFoundError:
        return ProbeReport(PROBE_NONE)
    except channel.Unreadable as exc:
        return ProbeReport(PROBE_FOREIGN if exc.foreign else PROBE_MALFORMED, reason=str(exc))
    try:
        return parse_report(decode(data), pid, start_ticks, now, stale_after_s, run_id)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError and Malformed are ValueErrors
        return ProbeReport(PROBE_MALFORMED, reason=f"malformed report: {exc}"[:200])


def decode(data: bytes) -> Any:
    """The JSON document in ``data``; raises ValueError for one nested deeper than ``MAX_DEPTH``, one that is not
    UTF-8, and one with NaN, Infinity or a number beyond a float (``1e999``), all of which ``json`` accepts."""
    if _too_deep(data):
        raise Malformed("nested too deeply")
    return json.loads(data.decode(), parse_constant=_not_finite, parse_float=_finite_float)


# An escaped character, then a string (escapes removed) to its closing quote or to the end: each matches wherever
# it starts, so a scan never retries, and neither repeats a group, which would keep state per repetition.
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"?')
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _too_deep(data: bytes) -> bool:
    """Whether the brackets outside strings nest deeper than ``MAX_DEPTH``. Each pass removes the innermost pairs;
    brackets that pair with none count a level each, as a parser would go down them before failing. Linear passes
    over the brackets alone, at most ``MAX_DEPTH + 1`` of them."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False  # no deeper than it has brackets: the common case, a report of a few DataLoaders
    brackets = _STRING.sub(b"", _ESCAPE.sub(b"", data)).translate(None, _NOT_BRACKET)
    depth = 0
    while brackets and depth <= MAX_DEPTH:
        brackets, pairs = _PAIR.subn(b"", brackets)
        if not pairs:
            return depth + len(brackets) > MAX_DEPTH
        depth += 1
    return depth > MAX_DEPTH


def _not_finite(name: str) -> float:
    raise Malformed(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"{text[:20]} is not a finite number")
    return value


def parse_report(
    doc: Any, pid: int, start_ticks: int | None, now: float, stale_after_s: float, run_id: str | None = None
) -> ProbeReport:
    """Validate a decoded report and turn it into the model; raises ``Malformed``."""
    if not isinstance(doc, dict) or doc.get("format") != channel.REPORT_FORMAT:
        raise Malformed("not a gputop probe report")
    if doc.get("version") != channel.REPORT_VERSION:
        raise Malformed(f"report version {_shown(doc.get('version'))}, this gputop reads {channel.REPORT_VERSION}")
    if not _is_int(doc.get("pid")) or doc["pid"] != pid:
        raise Malformed(f"report names PID {_shown(doc.get('pid'))}")
    written_at = doc.get("written_at")
    if not _is_number(written_at) or not 0 < written_at <= MAX_NUMBER:
        raise Malformed("no written_at")
    reported_start = _int(doc, "start_ticks")
    if start_ticks is not None and reported_start is not None and reported_start != start_ticks:
        return ProbeReport(PROBE_NONE, reason=f"report left by an earlier process with PID {pid}")
    if run_id is not None and doc.get("run_id") != run_id:
        return ProbeReport(PROBE_NONE, reason="report of another gputop run")
    age = max(0.0, now - written_at)
    if age > stale_after_s:
        return ProbeReport(PROBE_STALE, reason=f"last written {age:.0f} s ago", age_s=age)
    loaders = _list(doc.get("loaders"), "loaders", MAX_LOADERS)
    cuda = doc.get("cuda")
    if cuda is not None and not isinstance(cuda, dict):
        raise Malformed("cuda is not an object")
    devices = _list((cuda or {}).get("devices") or [], "CUDA devices", MAX_DEVICES)
    host = (cuda or {}).get("host_pinned")
    if host is not None and not isinstance(host, dict):
        raise Malformed("cuda has the wrong shape")
    step, step_reason = _step_or_reason(doc.get("step"))
    return ProbeReport(
        PROBE_OK,
        age_s=age,
        rank=_int(doc, "rank"),
        local_rank=_int(doc, "local_rank"),
        world_size=_int(doc, "world_size"),
        torch_version=_text(doc, "torch"),
        loaders=tuple(_loader(_object(item), age) for item in loaders),
        cuda=tuple(_device(_object(item)) for item in devices),
        pinned_host=None if host is None else PinnedHostMemory(**{k: _int(host, k) for k in _PINNED_FIELDS}),
        cuda_reason=_text(doc, "cuda_reason"),
        failures=_int(doc, "failures") or 0,
        last_failure=_text(doc, "last_failure"),
        autocast=_bool(doc, "autocast"),
        float32_matmul_precision=_word(doc, "float32_matmul_precision"),
        parameter_dtypes=_dtypes(doc.get("parameter_dtypes")),
        **_tensors(doc.get("tensors")),
        launch=launch_from(_object(doc.get("launch") or {})),
        step=step,
        step_reason=step_reason,
    )


def _step_or_reason(value: Any) -> tuple[StepAnatomy | None, str | None]:
    """The step's anatomy, or None and why: a malformed step costs the step alone, not the report's loaders,
    memory and launcher, which are read as before."""
    if value is None:
        return None, None
    try:
        return _step(_object(value)), None
    except Malformed as exc:
        return None, f"malformed step: {exc}"[:MAX_TEXT]


_STEP_FIELDS = frozenset(StepAnatomy.__dataclass_fields__)
_BOUNDARIES: tuple[str, ...] = get_args(StepBoundary)
_CLOCKS: tuple[str, ...] = get_args(StepClock)
_FLOPS_SOURCES: tuple[str, ...] = get_args(FlopsSource)
_SITE = re.compile(CODE_SITE)
_CALL = re.compile(SYNC_CALL)


def _step(item: dict[str, Any]) -> StepAnatomy:
    boundary, clock, source = item.get("boundary"), item.get("clock"), item.get("flops_source")
    if boundary not in _BOUNDARIES:
        raise Malformed(f"boundary: not one of {', '.join(_BOUNDARIES)}")
    if clock not in _CLOCKS:
        raise Malformed(f"clock: not one of {', '.join(_CLOCKS)}")
    if source is not None and source not in _FLOPS_SOURCES:
        raise Malformed(f"flops_source: not one of {', '.join(_FLOPS_SOURCES)}")
    sites = _list(item.get("sync_sites") or [], "sync sites", MAX_SYNC_SITES)
    return StepAnatomy(
        boundary=boundary,
        clock=clock,
        steps=_int(item, "steps") or 0,
        window_s=_number(item, "window_s"),
        window_steps=_int(item, "window_steps") or 0,
        step_s=_number(item, "step_s"),
        step_p95_s=_number(item, "step_p95_s"),
        warmup_step_s=_number(item, "warmup_step_s"),
        drift=_number(item, "drift"),
        steps_per_s=_number(item, "steps_per_s"),
        samples_per_s=_number(item, "samples_per_s"),
        phases_s=_phases(item.get("phases_s")),
        h2d_bytes_per_step=_int(item, "h2d_bytes_per_step"),
        h2d_pageable_share=_number(item, "h2d_pageable_share", 1.0),
        h2d_blocking_share=_number(item, "h2d_blocking_share", 1.0),
        syncs_per_step=_number(item, "syncs_per_step"),
        sync_sites=tuple(_sync_site(_object(site)) for site in sites),
        sync_sampled_steps=_int(item, "sync_sampled_steps") or 0,
        flops_per_step=_number(item, "flops_per_step"),
        flops_source=source,
        unavailable=_reasons(item.get("unavailable"), _STEP_FIELDS),
    )


def _phases(value: Any) -> tuple[tuple[Any, float], ...]:
    """The mean seconds of each phase, in ``PHASES`` order. A phase this gputop does not know is refused: the
    phases add up to the step, so one left out would make the others look larger than they are."""
    if value is None:
        return ()
    item = _object(value)
    unknown = [name for name in item if name not in PHASES]
    if unknown:
        raise Malformed(f"phases_s: unknown phase {_shown(unknown[0])}")
    return tuple((name, seconds) for name in PHASES if (seconds := _number(item, name)) is not None)


def _sync_site(item: dict[str, Any]) -> SyncSite:
    call = item.get("call")
    if not isinstance(call, str) or not _CALL.fullmatch(call):
        raise Malformed("sync site call: not a function name")
    per_step = _number(item, "per_step")
    if per_step is None:
        raise Malformed("sync site without per_step")
    return SyncSite(site=_site(item, "site"), call=call, per_step=per_step)


def _site(item: dict[str, Any], key: str) -> str:
    """A place in the job's code, ``train.py:57``: printable, at most ``MAX_TEXT`` characters, with its line."""
    value = item.get(key)
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise Malformed(f"{key}: not a file and line")
    text = printable(value)
    if not _SITE.fullmatch(text):
        raise Malformed(f"{key}: not a file and line")
    return text


def _reasons(value: Any, fields: frozenset[str]) -> Mapping[str, str]:
    """An ``unavailable`` map: each key one of ``fields``, each reason a string made printable and short."""
    if value is None:
        return frozen_reasons(None)
    item = _object(value)
    if not all(isinstance(key, str) and key in fields for key in item):
        raise Malformed("unavailable: names no field")
    return frozen_reasons({key: _text(item, key) or "" for key in item})


def _word(item: dict[str, Any], key: str) -> str | None:
    """A short lowercase name (``highest``, ``bfloat16``): anything else is malformed."""
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise Malformed(f"{key}: not a short name")
    return value


def _dtypes(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = _list(value, "parameter dtypes", MAX_DTYPES)
    if not all(isinstance(name, str) and _WORD.fullmatch(name) for name in names):
        raise Malformed("parameter_dtypes: not a list of dtype names")
    return tuple(names)


_WORD = re.compile(r"[a-z][a-z0-9_]{0,23}")
_DEVICE = re.compile(TENSOR_DEVICE)
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_TENSOR_FIELDS = ("parameters", "weights_bytes", "gradients_bytes", "optimizer_bytes", "allocated_after_step_bytes")


def _tensors(value: Any) -> dict[str, Any]:
    """The ``ProbeReport`` fields of the report's ``tensors`` (weights, gradients, optimizer state per device)."""
    if value is None:
        return {}
    item = _object(value)
    devices = []
    for entry in _list(item.get("devices"), "tensor devices", MAX_DEVICES):
        entry = _object(entry)
        device = entry.get("device")
        if not isinstance(device, str) or not _DEVICE.fullmatch(device):
            raise Malformed("tensor device: not cpu or cuda:N")
        dtypes = _object(entry.get("weight_dtypes") or {})
        if len(dtypes) > MAX_DTYPES or not all(isinstance(k, str) and _WORD.fullmatch(k) for k in dtypes):
            raise Malformed("weight_dtypes: not a map of dtype names to sizes")
        sizes = tuple((name, _int(dtypes, name) or 0) for name in dtypes)
        devices.append(TensorMemory(device, weight_dtypes=sizes, **{k: _int(entry, k) for k in _TENSOR_FIELDS}))
    names = _list(item.get("optimizers") or [], "optimizers", MAX_OPTIMIZERS)
    if not all(isinstance(name, str) and _CLASS_NAME.fullmatch(name) for name in names):
        raise Malformed("optimizers: not a list of class names")
    return {"tensors": tuple(devices), "optimizers": tuple(names), "tensors_age_s": _number(item, "age_s")}


_PINNED_FIELDS = ("allocated_bytes", "allocated_peak_bytes", "active_bytes", "num_host_alloc", "num_host_free")
_DEVICE_FIELDS = (
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "allocated_peak_bytes",
    "reserved_peak_bytes",
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
)


def _loader(item: dict[str, Any], age: float) -> LoaderView:
    """One loader; times that count up (the current wait, the last batch's age) are moved on to now."""
    loader_id = item.get("id")
    if not _is_int(loader_id) or not 0 <= loader_id <= MAX_INT:
        raise Malformed("loader without id")
    waiting = _number(item, "waiting_now_s")
    last_batch = _number(item, "last_batch_age_s")
    created_at, reasons = None, {}
    if item.get("created_at") is not None:
        try:
            created_at = _site(item, "created_at")
        except Malformed as exc:
            reasons["created_at"] = f"malformed: {exc}"
    pids = _list(item.get("worker_pids") or [], "worker PIDs", MAX_WORKER_PIDS)
    if not all(_is_int(p) and 0 < p <= channel.PID_MAX for p in pids):
        raise Malformed("worker_pids: not a list of PIDs")
    return LoaderView(
        loader_id=loader_id,
        requested=_config(item.get("requested")),
        effective=_config(item.get("effective")),
        worker_pids=tuple(pids),
        passes=_int(item, "passes") or 0,
        batches=_int(item, "batches") or 0,
        window_s=_number(item, "window_s"),
        window_batches=_int(item, "window_batches") or 0,
        data_wait_share=_number(item, "data_wait_share", 1.0),
        steps_per_s=_number(item, "steps_per_s"),
        samples_per_s=_number(item, "samples_per_s"),
        waiting_now_s=None if waiting is None else waiting + age,
        last_batch_age_s=None if last_batch is None else last_batch + age,
        pass_start_s=_number(item, "pass_start_s"),
        pass_start_wait_share=_number(item, "pass_start_wait_share", 1.0),
        unavailable=frozen_reasons(reasons),
        created_at=created_at,
        worker_batch_s=_number(item, "worker_batch_s"),
        worker_batch_p95_s=_number(item, "worker_batch_p95_s"),
    )


def _config(value: Any) -> LoaderConfig:
    if value is None:
        return LoaderConfig()
    item = _object(value)
    return LoaderConfig(
        batch_size=_int(item, "batch_size"),
        num_workers=_int(item, "num_workers"),
        pin_memory=_bool(item, "pin_memory"),
        pin_memory_device=_text(item, "pin_memory_device"),
        prefetch_factor=_int(item, "prefetch_factor"),
        persistent_workers=_bool(item, "persistent_workers"),
        start_method=_text(item, "start_method"),
        drop_last=_bool(item, "drop_last"),
        timeout_s=_number(item, "timeout_s"),
    )


def _device(item: dict[str, Any]) -> CudaMemory:
    device = item.get("device")
    if not _is_int(device) or not 0 <= device < MAX_DEVICES:
        raise Malformed("cuda device without index")
    return CudaMemory(device=device, uuid=_text(item, "uuid"), **{k: _int(item, k) for k in _DEVICE_FIELDS})


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str, most: int) -> list[Any]:
    if not isinstance(value, list):
        raise Malformed(f"{what} is not a list")
    if len(value) > most:
        raise Malformed(f"too many {what} ({len(value)}, at most {most})")
    return value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> TypeGuard[float]:
    """An int or a float; a float is finite here, ``decode`` refused the rest."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(item: dict[str, Any], key: str) -> int | None:
    """A count, a size or an index: absent or null is None; anything but an integer from 0 to ``MAX_INT`` is
    malformed."""
    value = item.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise Malformed(f"{key}: not an integer")
    if not 0 <= value <= MAX_INT:
        raise Malformed(f"{key}: out of range")
    return value


def _number(item: dict[str, Any], key: str, most: float = MAX_NUMBER) -> float | None:
    """A rate, a share or a time in seconds, from 0 to ``most``."""
    value = item.get(key)
    if value is None:
        return None
    if not _is_number(value):
        raise Malformed(f"{key}: not a number")
    if not 0 <= value <= most:
        raise Malformed(f"{key}: out of range")
    return float(value)


def _bool(item: dict[str, Any], key: str) -> bool | None:
    value = item.get(key)
    if value is not None and not isinstance(value, bool):
        raise Malformed(f"{key}: not true or false")
    return value


def _text(item: dict[str, Any], key: str) -> str | None:
    """A string made safe to show: cut to ``MAX_TEXT``, control characters and lone surrogates made visible."""
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Malformed(f"{key}: not a string")
    return printable(value[:MAX_TEXT])[:MAX_TEXT]


def _shown(value: Any) -> str:
    """A value from a report in a reason: short, and only of a kind whose ``repr`` is printable."""
    return repr(value)[:40] if value is None or isinstance(value, (int, float, str)) else type(value).__name__
