"""Reading the probe's reports into the model, trusting none of them.

A report is used only when it is a regular file owned by the monitor's own user, in a directory only that user
can enter, parses as the expected format, names the process it is read for (PID and start time, so a PID reused
by a later process does not inherit an old report), and was written recently. Anything else becomes a
``ProbeReport`` whose status says why it was ignored.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from gputop.model import (
    PROBE_FOREIGN,
    PROBE_MALFORMED,
    PROBE_NONE,
    PROBE_OK,
    PROBE_STALE,
    CudaMemory,
    LoaderConfig,
    LoaderView,
    PinnedHostMemory,
    ProbeReport,
)
from gputop.probe import channel

MAX_REPORT_BYTES = 1 << 20
STALE_AFTER_S = 5.0


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

    With ``run_id``, only a report of that ``gputop run`` counts.
    """
    path = channel.report_path(directory, pid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ProbeReport(PROBE_NONE)
    except OSError as exc:
        return ProbeReport(PROBE_MALFORMED, reason=f"cannot open report: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ProbeReport(PROBE_MALFORMED, reason="report is not a regular file")
        if info.st_uid != os.geteuid():
            return ProbeReport(PROBE_FOREIGN, reason=f"report owned by uid {info.st_uid}, not by this user")
        if info.st_size > MAX_REPORT_BYTES:
            return ProbeReport(PROBE_MALFORMED, reason=f"report too large ({info.st_size} bytes)")
        data = os.read(fd, MAX_REPORT_BYTES + 1)
    except OSError as exc:
        return ProbeReport(PROBE_MALFORMED, reason=f"cannot read report: {exc.strerror}")
    finally:
        os.close(fd)
    try:
        doc = json.loads(data)
        return parse_report(doc, pid, start_ticks, now, stale_after_s, run_id)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError and Malformed are ValueErrors
        return ProbeReport(PROBE_MALFORMED, reason=f"malformed report: {exc}"[:200])


def parse_report(
    doc: Any, pid: int, start_ticks: int | None, now: float, stale_after_s: float, run_id: str | None = None
) -> ProbeReport:
    """Validate a decoded report and turn it into the model; raises ``Malformed``."""
    if not isinstance(doc, dict) or doc.get("format") != channel.REPORT_FORMAT:
        raise Malformed("not a gputop probe report")
    if doc.get("version") != channel.REPORT_VERSION:
        raise Malformed(f"report version {doc.get('version')!r}, this gputop reads {channel.REPORT_VERSION}")
    if doc.get("pid") != pid:
        raise Malformed(f"report names PID {doc.get('pid')!r}")
    written_at = _number(doc, "written_at")
    if written_at is None:
        raise Malformed("no written_at")
    reported_start = _int(doc, "start_ticks")
    if start_ticks is not None and reported_start is not None and reported_start != start_ticks:
        return ProbeReport(PROBE_NONE, reason=f"report left by an earlier process with PID {pid}")
    if run_id is not None and doc.get("run_id") != run_id:
        return ProbeReport(PROBE_NONE, reason="report of another gputop run")
    age = max(0.0, now - written_at)
    if age > stale_after_s:
        return ProbeReport(PROBE_STALE, reason=f"last written {age:.0f} s ago", age_s=age)
    loaders = doc.get("loaders")
    if not isinstance(loaders, list):
        raise Malformed("loaders is not a list")
    cuda = doc.get("cuda")
    if cuda is not None and not isinstance(cuda, dict):
        raise Malformed("cuda is not an object")
    devices = (cuda or {}).get("devices") or []
    host = (cuda or {}).get("host_pinned")
    if not isinstance(devices, list) or (host is not None and not isinstance(host, dict)):
        raise Malformed("cuda has the wrong shape")
    return ProbeReport(
        PROBE_OK,
        age_s=age,
        rank=_int(doc, "rank"),
        local_rank=_int(doc, "local_rank"),
        world_size=_int(doc, "world_size"),
        torch_version=_str(doc, "torch"),
        loaders=tuple(_loader(_object(item), age) for item in loaders),
        cuda=tuple(_device(_object(item)) for item in devices),
        pinned_host=None if host is None else PinnedHostMemory(**{k: _int(host, k) for k in _PINNED_FIELDS}),
        cuda_reason=_str(doc, "cuda_reason"),
        failures=_int(doc, "failures") or 0,
        last_failure=_str(doc, "last_failure"),
    )


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
    loader_id = _int(item, "id")
    if loader_id is None:
        raise Malformed("loader without id")
    waiting = _number(item, "waiting_now_s")
    last_batch = _number(item, "last_batch_age_s")
    pids = item.get("worker_pids") or []
    if not isinstance(pids, list):
        raise Malformed("worker_pids is not a list")
    return LoaderView(
        loader_id=loader_id,
        requested=_config(item.get("requested")),
        effective=_config(item.get("effective")),
        worker_pids=tuple(p for p in pids if isinstance(p, int) and not isinstance(p, bool)),
        passes=_int(item, "passes") or 0,
        batches=_int(item, "batches") or 0,
        window_s=_number(item, "window_s"),
        window_batches=_int(item, "window_batches") or 0,
        data_wait_share=_number(item, "data_wait_share"),
        steps_per_s=_number(item, "steps_per_s"),
        samples_per_s=_number(item, "samples_per_s"),
        waiting_now_s=None if waiting is None else waiting + age,
        last_batch_age_s=None if last_batch is None else last_batch + age,
        pass_start_s=_number(item, "pass_start_s"),
        pass_start_wait_share=_number(item, "pass_start_wait_share"),
    )


def _config(value: Any) -> LoaderConfig:
    if value is None:
        return LoaderConfig()
    item = _object(value)
    return LoaderConfig(
        batch_size=_int(item, "batch_size"),
        num_workers=_int(item, "num_workers"),
        pin_memory=_bool(item, "pin_memory"),
        pin_memory_device=_str(item, "pin_memory_device"),
        prefetch_factor=_int(item, "prefetch_factor"),
        persistent_workers=_bool(item, "persistent_workers"),
        start_method=_str(item, "start_method"),
        drop_last=_bool(item, "drop_last"),
        timeout_s=_number(item, "timeout_s"),
    )


def _device(item: dict[str, Any]) -> CudaMemory:
    device = _int(item, "device")
    if device is None:
        raise Malformed("cuda device without index")
    return CudaMemory(device=device, uuid=_str(item, "uuid"), **{k: _int(item, k) for k in _DEVICE_FIELDS})


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"expected an object, got {type(value).__name__}")
    return value


def _int(item: dict[str, Any], key: str) -> int | None:
    value = item.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(item: dict[str, Any], key: str) -> float | None:
    value = item.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bool(item: dict[str, Any], key: str) -> bool | None:
    value = item.get(key)
    return value if isinstance(value, bool) else None


def _str(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    return value if isinstance(value, str) else None
