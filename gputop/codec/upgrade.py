"""Snapshots of older formats, read as the current one: a version-1 snapshot's process rows and workers reshaped
(their host process's fields nested in ``host``), training views given the evidence their values show, and fields
added later than a snapshot was written (``ADDED_LATER``) known as not recorded."""

from __future__ import annotations

from collections.abc import Mapping

from gputop.codec.bounds import brief
from gputop.codec.encode import FORMAT, FORMAT_KEY
from gputop.model import GPM_PROFILE_FIELDS, TORCH_MAIN_THREAD, Gpu, HostProcess, LoaderView, evidence_of

V1_PROCESS_HOST_KEYS = ("visible", "user", "name", "command", "cpu_percent", "rss_bytes", "start_time", "status")
"""A version-1 process row's keys that belong to its host process."""
V1_WORKER_HOST_KEYS = {"parent_pid": "ppid", "status": "status", "cpu_percent": "cpu_percent", "rss_bytes": "rss_bytes"}
"""A version-1 worker's keys that belong to its host process, and the ``HostProcess`` field of each."""
V1_WORKER_NOT_RECORDED = ("user", "name", "command", "start_time", "num_threads")
"""The host fields a version-1 worker never carried: from the snapshot's ``host_processes``, or not recorded."""
V1_NOT_RECORDED = "not recorded"
"""The reason for a host value that a version-1 process row or worker did not carry (a row's parent and thread
count, a worker's name, user, command, start time and thread count) when the snapshot's own ``host_processes``
does not have it either."""
ADDED_LATER: dict[type, tuple[str, ...]] = {
    Gpu: (
        "ecc_enabled",
        "pcie_link_gen",
        "pcie_link_width",
        "pcie_link_gen_max",
        "pcie_link_width_max",
        *GPM_PROFILE_FIELDS,
        "energy_j",
        "health",
        "pci_bus_id",
    ),
    HostProcess: ("container", "pod", "slurm"),
    LoaderView: ("created_at", "worker_batch_s", "worker_batch_p95_s"),
}
"""Fields added after snapshots were first recorded: absent from an older recording or remote gputop, they decode
as None with the reason ``V1_NOT_RECORDED``, so that no null goes without a reason."""


def upgraded(plain: object) -> tuple[object, int]:
    """A snapshot's JSON value in the current format, from any format this gputop reads, and its format. Only a
    well-formed version 1 is reshaped; anything else is left for the strict decoder to refuse. (A ``host`` that
    format 3 wrote as a PID is resolved as it is decoded: ``gputop.codec.decode``.)"""
    if type(plain) is not dict:
        return plain, FORMAT
    version = plain.pop(FORMAT_KEY, 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise ValueError(f"snapshot format {brief(version)}: this gputop reads formats 1 to {FORMAT}")
    if version != 1:
        return plain, version
    hosts = plain.get("host_processes")
    known = {h["pid"]: h for h in hosts if type(h) is dict and type(h.get("pid")) is int} if type(hosts) is list else {}
    processes = plain.get("processes")
    if type(processes) is list:
        plain["processes"] = [_v1_process(row, known) for row in processes]
    views = plain.get("training")
    if type(views) is list:
        for view in views:
            workers = view.get("workers") if type(view) is dict else None
            if type(workers) is list:
                view["workers"] = [_v1_worker(row, known) for row in workers]
    return plain, version


def with_evidence(plain: object) -> object:
    """Training views recorded before they said why they are training views get the evidence their recorded
    values show (a probe report, DataLoader workers, torch's ``pt_main_thread`` name), so that the advisor judges
    an old recording as it did when it was made."""
    views = plain.get("training") if type(plain) is dict else None
    for view in views if type(views) is list else ():
        if type(view) is not dict or "evidence" in view:
            continue
        probe = view.get("probe")
        status = probe.get("status") if type(probe) is dict else None
        workers = bool(view.get("workers") or view.get("workers_replaced"))
        evidence = list(evidence_of(status, workers, False, view.get("name") == TORCH_MAIN_THREAD))
        view["evidence"] = evidence
    return plain


def _v1_process(row: object, hosts: Mapping[object, dict[str, object]]) -> object:
    """A version-1 process row as version 2: its host fields, and their reasons, moved into ``host``. Its parent
    and thread count, which the row never carried, come from the snapshot's ``host_processes`` when it has the
    PID (the recorder took both from the same reading), else are unknown with ``V1_NOT_RECORDED``."""
    if type(row) is not dict:
        return row
    reasons = row.get("unavailable", {})
    if type(reasons) is not dict:
        return row  # left for the decoder to refuse
    pid = row.get("pid")
    host: dict[str, object] = {"pid": pid}
    host_reasons: dict[object, object] = {}
    for key in V1_PROCESS_HOST_KEYS:
        if key in row:
            host[key] = row.pop(key)
        if key in reasons:
            host_reasons[key] = reasons.pop(key)
    same = hosts.get(pid) if type(pid) is int else None
    same_reasons = same.get("unavailable", {}) if same is not None else None
    for key in ("ppid", "num_threads"):
        said = reasons.pop(key, None)  # a version-1 row carried the host's reasons for these, not their values
        if same is not None and key in same and type(same_reasons) is dict:
            host[key] = same[key]
            if key in same_reasons:
                host_reasons[key] = same_reasons[key]
        else:
            host_reasons[key] = V1_NOT_RECORDED if said is None else said
    host["unavailable"] = host_reasons
    return {**row, "unavailable": reasons, "host": host}


def _v1_worker(row: object, hosts: Mapping[object, dict[str, object]]) -> object:
    """A version-1 worker as version 2: its PID, parent, status, CPU and RSS, and their reasons, moved into
    ``host``. The host's other fields, which the worker never carried, come from the snapshot's
    ``host_processes`` entry of the same PID (the collector read both from the same process), else are unknown
    with ``V1_NOT_RECORDED``."""
    if type(row) is not dict:
        return row
    reasons = row.get("unavailable", {})
    if type(reasons) is not dict:
        return row  # left for the decoder to refuse
    pid = row.pop("pid", None)
    same = hosts.get(pid) if type(pid) is int else None
    same_reasons = same.get("unavailable", {}) if same is not None else None
    host: dict[str, object] = {"pid": pid}
    host_reasons: dict[object, object] = {}
    if same is not None and type(same_reasons) is dict:
        host.update((key, same[key]) for key in V1_WORKER_NOT_RECORDED if key in same)
        host_reasons.update((key, same_reasons[key]) for key in V1_WORKER_NOT_RECORDED if key in same_reasons)
        if "visible" in same:
            host["visible"] = same["visible"]
    else:
        host_reasons.update((key, V1_NOT_RECORDED) for key in V1_WORKER_NOT_RECORDED)
    for key, field in V1_WORKER_HOST_KEYS.items():
        if key in row:
            host[field] = row.pop(key)
        if key in reasons:
            host_reasons[field] = reasons.pop(key)
        elif host.get(field) is None:
            host_reasons[field] = V1_NOT_RECORDED
    host["unavailable"] = host_reasons
    return {**row, "unavailable": reasons, "host": host}
