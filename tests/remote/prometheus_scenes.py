"""A fleet as Prometheus holds it, for the ``--prometheus`` view's pictures: the answers a server gives for the
series of gputop's own exporter over the scene hosts (made by the exporter's code, ``snapshot_families``), a host
only dcgm-exporter reports, and a host whose exporter stopped 42 seconds ago."""

from __future__ import annotations

from gputop.export.metrics import snapshot_families
from gputop.model import Snapshot
from gputop.remote.hostspec import HostSpec
from gputop.remote.prometheus.query import Sample
from gputop.remote.prometheus.readings import DCGM_SAMPLED, GPUTOP_SAMPLED, QUERIES
from gputop.remote.prometheus.source import PrometheusFleet
from gputop.remote.status import HostEvent
from tests.remote import host_scenes
from tests.remote.host_scenes import NOW, ScriptedFleet
from tests.ui import scenes

TRAINING = "gpu-node-07:24400"
SERVING = "gpu-node-08:24400"
STOPPED = "gpu-node-11:24400"
DCGM_HOST = "dgx-a100-03"
STOPPED_AGO_S = 42.0
MIB = 1024**2


def exported(instance: str, snap: Snapshot, per_process: bool) -> dict[str, list[Sample]]:
    """What Prometheus answers for each of gputop's series of ``snap``, scraped from ``instance``."""
    answers: dict[str, list[Sample]] = {GPUTOP_SAMPLED: [Sample({"instance": instance, "job": "gputop"}, snap.time)]}
    for family in snapshot_families(snap, per_process):
        for sample in family.samples:
            labels = {**sample.labels, "instance": instance, "job": "gputop"}
            answers.setdefault(sample.name, []).append(Sample(labels, float(sample.value)))
    return answers


def dcgm_exported(hostname: str, snap: Snapshot) -> dict[str, list[Sample]]:
    """dcgm-exporter's default counters of ``snap``'s GPUs, in its units (MiB, MHz, %)."""
    answers: dict[str, list[Sample]] = {}
    for gpu in snap.gpus:
        labels = {"gpu": str(gpu.index), "UUID": gpu.uuid or "", "modelName": gpu.name or "", "Hostname": hostname}
        labels["DCGM_FI_DRIVER_VERSION"] = snap.driver.driver_version or ""  # as dcgm-exporter 3.3 and later label
        values = {
            DCGM_SAMPLED: snap.time,
            "DCGM_FI_DEV_GPU_UTIL": gpu.utilization_gpu_percent,
            "DCGM_FI_DEV_FB_USED": (gpu.memory_used_bytes or 0) / MIB,
            "DCGM_FI_DEV_FB_FREE": (gpu.memory_free_bytes or 0) / MIB,
            "DCGM_FI_DEV_GPU_TEMP": gpu.temperature_c,
            "DCGM_FI_DEV_POWER_USAGE": gpu.power_w,
            "DCGM_FI_DEV_SM_CLOCK": gpu.clock_sm_mhz,
        }
        for query, value in values.items():
            if value is not None:
                answers.setdefault(query, []).append(Sample(labels, float(value)))
    return answers


def merged(*parts: dict[str, list[Sample]]) -> dict[str, list[Sample]]:
    answers: dict[str, list[Sample]] = {query: [] for query in QUERIES}
    for part in parts:
        for query, samples in part.items():
            answers.setdefault(query, []).extend(samples)
    return answers


def fleet_events() -> tuple[tuple[HostSpec, ...], list[HostEvent]]:
    """The hosts and events of two refreshes: all four hosts, then the stopped one's series gone."""
    training, serving = scenes.training_node(NOW - 0.6), host_scenes.serving_node(NOW - 0.3)
    stopped = scenes.training_node(NOW - STOPPED_AGO_S)
    dcgm = host_scenes.serving_node(NOW - 0.8)
    clock = [NOW - STOPPED_AGO_S]
    fleet = PrometheusFleet("http://prometheus:9090", lambda expr: [], 1.0, lambda: clock[0])
    first = fleet.refresh(
        merged(
            exported(TRAINING, scenes.training_node(NOW - STOPPED_AGO_S), True),
            exported(SERVING, host_scenes.serving_node(NOW - STOPPED_AGO_S), False),
            exported(STOPPED, stopped, False),
            dcgm_exported(DCGM_HOST, host_scenes.serving_node(NOW - STOPPED_AGO_S)),
        )
    )
    clock[0] = NOW
    later = fleet.refresh(
        merged(exported(TRAINING, training, True), exported(SERVING, serving, False), dcgm_exported(DCGM_HOST, dcgm))
    )
    return tuple(HostSpec(event.name) for event in first), [*first, *later]


def prometheus_fleet() -> ScriptedFleet:
    specs, events = fleet_events()
    return ScriptedFleet(specs, events=events, now=NOW)
