"""What Prometheus holds about each host, made into the snapshots the multi-host view draws. Pure: tested with
plain ``Sample`` lists.

Two exporters are read. gputop's own (``gputop export``, its series named in ``gputop.export.metrics``): a host
is a scrape target, named by its ``instance`` label. NVIDIA's dcgm-exporter (its default counters,
``etc/default-counters.csv``: memory in MiB, clocks in MHz, utilisation in %): a host is its ``Hostname`` label
(or ``instance`` without one), read only where gputop's exporter does not report the same host.

Each family is one query for every host at once (``QUERIES``), so a refresh costs the same number of queries
whatever the fleet's size. A value Prometheus does not hold is None, as in any snapshot, never a made-up 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from gputop.model import (
    COMPUTE,
    DRIVER_OK,
    EVIDENCE_RANK,
    GPU_ERROR,
    GPU_OK,
    THROTTLE_REASONS,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostInfo,
    Launch,
    Snapshot,
    TrainingView,
    frozen_reasons,
)
from gputop.remote.prometheus.query import Sample

MIB: Final = 1024 * 1024
MAX_HOSTS: Final = 4096
"""Hosts beyond this many are left out (the view says so): sections enough for any dashboard one can read."""
MAX_GPUS_PER_HOST: Final = 64
MAX_PROCESSES_PER_HOST: Final = 1024
MAX_INT: Final = 2**63 - 1


def _percent(ratio: float) -> float:
    return ratio * 100


def _mhz(hertz: float) -> float:
    return hertz / 1_000_000


def _mib(mib: float) -> float:
    return mib * MIB


def _same(value: float) -> float:
    return value


@dataclass(frozen=True)
class GpuSeries:
    """One GPU family: its metric, the ``Gpu`` field it fills, and how its unit becomes the field's."""

    metric: str
    field: str
    convert: Callable[[float], float] = _same
    integer: bool = False


GPUTOP_GPU: Final = (
    GpuSeries("gputop_gpu_memory_total_bytes", "memory_total_bytes", integer=True),
    GpuSeries("gputop_gpu_memory_used_bytes", "memory_used_bytes", integer=True),
    GpuSeries("gputop_gpu_memory_free_bytes", "memory_free_bytes", integer=True),
    GpuSeries("gputop_gpu_busy_ratio", "utilization_gpu_percent", _percent),
    GpuSeries("gputop_gpu_memory_busy_ratio", "utilization_memory_percent", _percent),
    GpuSeries("gputop_gpu_sm_activity_ratio", "sm_activity_percent", _percent),
    GpuSeries("gputop_gpu_temperature_celsius", "temperature_c"),
    GpuSeries("gputop_gpu_power_watts", "power_w"),
    GpuSeries("gputop_gpu_power_limit_watts", "power_limit_w"),
    GpuSeries("gputop_gpu_sm_clock_hertz", "clock_sm_mhz", _mhz, integer=True),
    GpuSeries("gputop_gpu_memory_clock_hertz", "clock_mem_mhz", _mhz, integer=True),
)
DCGM_GPU: Final = (
    GpuSeries("DCGM_FI_DEV_GPU_UTIL", "utilization_gpu_percent"),
    GpuSeries("DCGM_FI_DEV_MEM_COPY_UTIL", "utilization_memory_percent"),
    GpuSeries("DCGM_FI_DEV_FB_USED", "memory_used_bytes", _mib, integer=True),
    GpuSeries("DCGM_FI_DEV_FB_FREE", "memory_free_bytes", _mib, integer=True),
    GpuSeries("DCGM_FI_PROF_SM_ACTIVE", "sm_activity_percent", _percent),
    GpuSeries("DCGM_FI_DEV_GPU_TEMP", "temperature_c"),
    GpuSeries("DCGM_FI_DEV_POWER_USAGE", "power_w"),
    GpuSeries("DCGM_FI_DEV_SM_CLOCK", "clock_sm_mhz", integer=True),
    GpuSeries("DCGM_FI_DEV_MEM_CLOCK", "clock_mem_mhz", integer=True),
)
PERCENT_FIELDS: Final = frozenset({"utilization_gpu_percent", "utilization_memory_percent", "sm_activity_percent"})

GPUTOP_UP: Final = "gputop_gpu_up"
GPUTOP_SAMPLED: Final = "timestamp(gputop_driver_up)"
"""When each gputop exporter was last scraped: the time of its host's snapshot."""
DCGM_SAMPLED: Final = "timestamp(DCGM_FI_DEV_GPU_UTIL)"
DRIVER_INFO: Final = "gputop_driver_info"
HOST_SERIES: Final = (
    "gputop_host_cpu_busy_ratio",
    "gputop_host_cpus",
    "gputop_host_memory_total_bytes",
    "gputop_host_memory_used_bytes",
)
PROCESS_MEMORY: Final = "gputop_process_gpu_memory_bytes"
PROCESS_SM: Final = "gputop_process_sm_ratio"
ADVICE: Final = "gputop_advice_active"
THROTTLE: Final = "gputop_gpu_throttle_reason"
JOB_INFO: Final = "gputop_training_job_info"
"""Each rank of a job of several ranks, with the job's id (the same on every host for a torchrun job)."""
DOWN: Final = "up == 0"
"""The scrape targets Prometheus cannot scrape now: a host down before it gave any series is known only here."""
EXPORTER_JOBS: Final = ("gputop", "dcgm")
"""Words in a scrape job's name that make its targets GPU exporters' even while none of them answers."""
NO_PROCESSES: Final = {
    "gputop": "no GPU processes exported (gputop export --per-process exports them)",
    "dcgm-exporter": "dcgm-exporter exports no processes",
}
"""Why a host read from Prometheus lists no process: its exporter may simply not export them."""

QUERIES: Final = (
    GPUTOP_SAMPLED,
    DCGM_SAMPLED,
    GPUTOP_UP,
    DRIVER_INFO,
    *HOST_SERIES,
    *(s.metric for s in GPUTOP_GPU),
    *(s.metric for s in DCGM_GPU),
    PROCESS_MEMORY,
    PROCESS_SM,
    ADVICE,
    THROTTLE,
    JOB_INFO,
    DOWN,
)
"""Every query of a refresh, one per family, all hosts at once."""

Answers = Mapping[str, Iterable[Sample]]
"""Each query's instant vector (a query that failed or holds nothing: no entry, or an empty one)."""


@dataclass(frozen=True)
class Reading:
    """One host as Prometheus holds it now: its snapshot, taken when the host was last scraped."""

    name: str
    snapshot: Snapshot
    source: str
    """``gputop`` or ``dcgm-exporter``: whose series these are."""


@dataclass
class _Host:
    sampled_at: float
    gpus: dict[int, dict[str, object]] = field(default_factory=dict)


def _digits(text: str, most: int) -> bool:
    """Whether a label is a number as the exporters write one: ASCII digits, at most ``most`` of them. Python's
    ``isdigit`` also takes ``²`` (which ``int`` then refuses) and ``٣`` (which ``int`` reads as 3)."""
    return text.isascii() and text.isdigit() and len(text) <= most


def _index(labels: Mapping[str, str]) -> int | None:
    text = labels.get("gpu", "")
    return int(text) if _digits(text, 4) else None


def _gputop_host(labels: Mapping[str, str]) -> str:
    return labels.get("instance", "")


DCGM_DRIVER_LABEL: Final = "DCGM_FI_DRIVER_VERSION"
"""The label dcgm-exporter puts on every series with the driver's version (``DCGM_FI_DRIVER_VERSION="550.144.03"``;
dcgm-exporter 3.3 and later)."""
_DRIVER_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}", re.ASCII)


def _dcgm_driver(samples: Iterable[Sample]) -> str | None:
    """The driver version a dcgm-exporter host's series are labelled with, where it is one's form."""
    for sample in samples:
        version = sample.labels.get(DCGM_DRIVER_LABEL, "")
        if _DRIVER_VERSION.fullmatch(version):
            return version
    return None


def _dcgm_host(labels: Mapping[str, str]) -> str:
    return labels.get("Hostname") or labels.get("instance", "")


def _value(series: GpuSeries, raw: float) -> float | int | None:
    value = series.convert(raw)
    if value < 0 or (series.field in PERCENT_FIELDS and value > 100.5):
        return None  # no reading of these is negative; a share past 100 % is no share
    if series.integer:
        return int(value) if value <= MAX_INT else None
    return value


def read_fleet(answers: Answers) -> tuple[list[Reading], int]:
    """Every host the answers hold, in name order, and how many more were left out (past ``MAX_HOSTS``)."""
    gputop = _hosts(answers, GPUTOP_SAMPLED, _gputop_host)
    dcgm = _hosts(answers, DCGM_SAMPLED, _dcgm_host)
    gputop_names = set(gputop) | {name.rpartition(":")[0] for name in gputop}
    for name in list(dcgm):
        if name in gputop_names:
            del dcgm[name]  # gputop's own series say more
    _fill_gpus(answers, gputop, _gputop_host, GPUTOP_GPU, identity=("uuid", "name"))
    _fill_gpus(answers, dcgm, _dcgm_host, DCGM_GPU, identity=("UUID", "modelName"))
    readings = [_gputop_reading(name, host, answers) for name, host in gputop.items()]
    sampled = _by_host(answers, DCGM_SAMPLED, _dcgm_host)
    for name, host in dcgm.items():
        reading = _reading(name, host, "dcgm-exporter", _host_info(name, {}), ())
        driver = _dcgm_driver(sampled.get(name, ()))
        if driver is not None:
            snap = reading.snapshot
            reading = replace(reading, snapshot=replace(snap, driver=replace(snap.driver, driver_version=driver)))
        readings.append(reading)
    readings.sort(key=lambda r: r.name)
    return readings[:MAX_HOSTS], max(0, len(readings) - MAX_HOSTS)


def down_targets(answers: Answers) -> list[str]:
    """The exporters' targets Prometheus cannot scrape (``up == 0``), by ``instance``, in name order: those of a
    job that gputop's or dcgm-exporter's series come from, or whose name says it is one of theirs. A target of any
    other job (a node exporter, Prometheus itself) is none of the view's business."""
    jobs = {s.labels.get("job") for query in (GPUTOP_SAMPLED, DCGM_SAMPLED) for s in answers.get(query, ())}
    down = {
        sample.labels["instance"]
        for sample in answers.get(DOWN, ())
        if sample.labels.get("instance")
        and (sample.labels.get("job") in jobs or any(w in sample.labels.get("job", "") for w in EXPORTER_JOBS))
    }
    return sorted(down)[:MAX_HOSTS]


def _hosts(answers: Answers, query: str, host_of: Callable[[Mapping[str, str]], str]) -> dict[str, _Host]:
    """The hosts with a sample time, each at its latest (a host's series may be scraped a moment apart)."""
    hosts: dict[str, _Host] = {}
    for sample in answers.get(query, ()):
        name = host_of(sample.labels)
        if name and sample.value > 0:
            known = hosts.get(name)
            if known is None or sample.value > known.sampled_at:
                hosts[name] = _Host(sample.value)
    return hosts


def _fill_gpus(
    answers: Answers,
    hosts: Mapping[str, _Host],
    host_of: Callable[[Mapping[str, str]], str],
    families: Iterable[GpuSeries],
    identity: tuple[str, str],
) -> None:
    uuid_label, name_label = identity
    for series in families:
        for sample in answers.get(series.metric, ()):
            host = hosts.get(host_of(sample.labels))
            index = _index(sample.labels)
            if host is None or index is None:
                continue
            gpu = host.gpus.get(index)
            if gpu is None:
                if len(host.gpus) >= MAX_GPUS_PER_HOST:
                    continue
                gpu = host.gpus[index] = {
                    "uuid": sample.labels.get(uuid_label) or None,
                    "name": sample.labels.get(name_label) or None,
                }
            gpu[series.field] = _value(series, sample.value)


def _gpu(index: int, fields: Mapping[str, object], up: float | None, source: str) -> Gpu:
    def number(key: str) -> float | None:
        value = fields.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    def integer(key: str) -> int | None:
        value = fields.get(key)
        return value if isinstance(value, int) else None

    def text(key: str) -> str | None:
        value = fields.get(key)
        return value if isinstance(value, str) else None

    used, free = integer("memory_used_bytes"), integer("memory_free_bytes")
    total = integer("memory_total_bytes")
    if total is None and used is not None and free is not None:
        total = used + free  # dcgm-exporter's default counters have no total: what is used and what is free
    lost = up == 0
    throttle = fields.get("throttle_reasons")
    reasons = tuple(r for r in THROTTLE_REASONS if r in throttle) if isinstance(throttle, tuple) else None
    return Gpu(
        index,
        text("uuid"),
        text("name"),
        state=GPU_ERROR if lost else GPU_OK,
        reason="the exporter reports it cannot read this GPU" if lost else None,
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=free,
        utilization_gpu_percent=number("utilization_gpu_percent"),
        utilization_memory_percent=number("utilization_memory_percent"),
        sm_activity_percent=number("sm_activity_percent"),
        temperature_c=number("temperature_c"),
        power_w=number("power_w"),
        power_limit_w=number("power_limit_w"),
        clock_sm_mhz=integer("clock_sm_mhz"),
        clock_mem_mhz=integer("clock_mem_mhz"),
        throttle_reasons=reasons,
        unavailable={"processes": NO_PROCESSES[source]},
    )


def _by_host(
    answers: Answers, query: str, host_of: Callable[[Mapping[str, str]], str] = _gputop_host
) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for sample in answers.get(query, ()):
        out.setdefault(host_of(sample.labels), []).append(sample)
    return out


def _gputop_reading(name: str, host: _Host, answers: Answers) -> Reading:
    ups = {_index(s.labels): s.value for s in _by_host(answers, GPUTOP_UP).get(name, ())}
    for sample in _by_host(answers, THROTTLE).get(name, ()):
        index, reason = _index(sample.labels), sample.labels.get("reason")
        gpu = host.gpus.get(index) if index is not None else None
        active = gpu.get("throttle_reasons", ()) if gpu is not None else None
        if gpu is not None and isinstance(active, tuple) and reason in THROTTLE_REASONS:
            gpu["throttle_reasons"] = (*active, reason) if sample.value == 1 else active
    for index in ups:
        if index is not None and index not in host.gpus and len(host.gpus) < MAX_GPUS_PER_HOST:
            host.gpus[index] = {}
    values = {query: next(iter(_by_host(answers, query).get(name, ())), None) for query in HOST_SERIES}
    info = _host_info(name, {query: s.value for query, s in values.items() if s is not None})
    processes = _processes(name, answers)
    reading = _reading(name, host, "gputop", info, processes, ups)
    drivers = _by_host(answers, DRIVER_INFO).get(name)
    findings = _findings(_by_host(answers, ADVICE).get(name, ()))
    snap = reading.snapshot
    if drivers:
        labels = drivers[0].labels
        driver = replace(
            snap.driver, driver_version=labels.get("driver_version"), cuda_version=labels.get("cuda_version")
        )
        snap = replace(snap, driver=driver)
    return replace(reading, snapshot=replace(snap, notices=findings, training=_job_ranks(name, answers)))


def _job_ranks(name: str, answers: Answers) -> tuple[TrainingView, ...]:
    """The host's ranks of jobs of several ranks, as training views that carry no more than the exporter says:
    the rank, the world size and the job's id as the run's identity, so that ``gputop.jobs`` gathers the ranks of
    one job from every host into one. A rank without a PID (no ``--per-process``) is numbered in its host."""
    views = []
    samples = _by_host(answers, JOB_INFO).get(name, ())[:MAX_PROCESSES_PER_HOST]
    per_job: dict[str, int] = {}
    for sample in samples:
        per_job[sample.labels.get("job_id", "")] = per_job.get(sample.labels.get("job_id", ""), 0) + 1
    for n, sample in enumerate(samples, start=1):
        labels = sample.labels
        job_id, pid, rank, world = (labels.get(k, "") for k in ("job_id", "pid", "rank", "world_size"))
        if not job_id or not all(_digits(text, 9) for text in (pid or "1", rank, world or "1")):
            continue  # not as gputop writes it; world_size is empty for a job whose launcher did not say
        launch = Launch(rank=int(rank), world_size=int(world) if world else max(2, per_job[job_id]), run_id=job_id)
        views.append(TrainingView(int(pid) if pid else n, evidence=(EVIDENCE_RANK,), launch=launch))
    return tuple(views)


def _reading(
    name: str,
    host: _Host,
    source: str,
    info: HostInfo,
    processes: tuple[GpuProcess, ...],
    ups: Mapping[int | None, float] | None = None,
) -> Reading:
    gpus = tuple(_gpu(i, host.gpus[i], (ups or {}).get(i), source) for i in sorted(host.gpus))
    snap = Snapshot(host.sampled_at, info, DriverInfo(DRIVER_OK), gpus, processes)
    return Reading(name, snap, source)


def _host_info(name: str, values: Mapping[str, float]) -> HostInfo:
    """The machine as the exporter says it; 0 CPUs and 0 bytes of memory where it says nothing (no machine has
    none, so the view reads 0 as not known and leaves it out)."""

    def number(query: str) -> int:
        value = values.get(query)
        return int(value) if value is not None and 0 <= value <= MAX_INT else 0

    busy = values.get("gputop_host_cpu_busy_ratio")
    cpus = number("gputop_host_cpus")
    total, used = number("gputop_host_memory_total_bytes"), number("gputop_host_memory_used_bytes")
    cpu_percent = None if busy is None or not 0 <= busy <= 1.005 else busy * 100
    return HostInfo(name, cpu_percent, (), cpus, cpus, None, total, used, max(0, total - used), 0, 0)


NOT_EXPORTED: Final = "names not exported"
"""Why a process read from an exporter has no user and no command: no exporter exports them (command lines carry
tokens and paths, user names identify people: docs/exporter.md)."""
_NAMES_NOT_EXPORTED: Final = frozen_reasons({"user": NOT_EXPORTED, "command": NOT_EXPORTED})


def _processes(name: str, answers: Answers) -> tuple[GpuProcess, ...]:
    """The host's GPU processes, where its exporter runs with ``--per-process``: PID, GPU, memory and %SM."""
    sm = {(s.labels.get("gpu"), s.labels.get("pid")): s.value for s in _by_host(answers, PROCESS_SM).get(name, ())}
    processes = []
    for sample in _by_host(answers, PROCESS_MEMORY).get(name, ())[:MAX_PROCESSES_PER_HOST]:
        index, pid = _index(sample.labels), sample.labels.get("pid", "")
        if index is None or not _digits(pid, 10) or sample.value < 0:
            continue
        share = sm.get((sample.labels.get("gpu"), pid))
        percent = None if share is None or not 0 <= share <= 1.005 else share * 100
        memory = int(min(sample.value, MAX_INT))
        processes.append(GpuProcess(int(pid), index, COMPUTE, memory, percent, unavailable=_NAMES_NOT_EXPORTED))
    return tuple(processes)


FINDING: Final = "finding "
"""How a host's notice that is one of its exporter's findings begins."""


def fleet_findings(snap: Snapshot) -> tuple[str, ...]:
    """The findings a host's exporter reports (``data-starved (warn) on 2 processes``), from a snapshot read from
    Prometheus; none from any other snapshot."""
    return tuple(n.removeprefix(FINDING) for n in snap.notices if n.startswith(FINDING))


def _findings(samples: Iterable[Sample]) -> tuple[str, ...]:
    """The advisor's active findings the exporter reports: ``finding data-starved (warn) on 2 processes``."""
    counts: dict[tuple[str, str], float] = {}
    for sample in samples:
        key = (sample.labels.get("id", "?"), sample.labels.get("severity", "?"))
        counts[key] = counts.get(key, 0) + (sample.value if sample.labels.get("pid") is None else 1)
    return tuple(
        f"{FINDING}{rule} ({severity}) on {n:g} process{'es' if n != 1 else ''}"
        for (rule, severity), n in sorted(counts.items())
    )
