"""The exporter's text for a cluster: every figure of a training step, and dcgm-exporter's label names beside
gputop's (``--dcgm-labels``), read back with prometheus-client's parser (no driver, no subprocess)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputop.export.collector import SnapshotCollector
from gputop.jobs import find_jobs
from gputop.model import EVIDENCE_RANK, GPU_LOST_STATE, MIG_ENABLED, Launch, MigInstance, Snapshot, StepCost
from tests.export.scrape import parse, value
from tests.export.test_metrics import GPU, NAME, NOW, UUID, snapshot, training_view

pytestmark = pytest.mark.fast


def scrape(snap: Snapshot, dcgm_hostname: str | None = None, per_process: bool = False) -> list:
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: snap, per_process, clock=lambda: NOW, dcgm_hostname=dcgm_hostname))
    return parse(generate_latest(registry).decode())


MEASURED = training_view(
    steps=1200,
    step_p95_s=0.031,
    drift=1.25,
    h2d_bytes_per_step=48 * 1024**2,
    h2d_pageable_share=0.75,
    h2d_blocking_share=0.5,
    syncs_per_step=3.0,
    flops_per_step=1.224e12,
)
COST = StepCost(
    energy_per_step_j=5.5,
    energy_per_sample_j=0.171875,
    power_w=275.0,
    achieved_tflops=61.2,
    peak_tflops=989.5,
    precision="bf16",
    mfu=0.0618,
)


def test_every_figure_of_a_training_step_is_exported_in_base_units() -> None:
    samples = scrape(snapshot(training=(replace(MEASURED, cost=COST),)))

    job = {"gpu": "0", "rank": "0"}
    assert value(samples, "gputop_training_steps_total", **job) == 1200
    assert value(samples, "gputop_training_step_p95_seconds", **job) == 0.031
    assert value(samples, "gputop_training_step_drift_ratio", **job) == 1.25
    assert value(samples, "gputop_training_h2d_bytes_per_step", **job) == 48 * 1024**2
    assert value(samples, "gputop_training_h2d_pageable_ratio", **job) == 0.75
    assert value(samples, "gputop_training_h2d_blocking_ratio", **job) == 0.5
    assert value(samples, "gputop_training_syncs_per_step", **job) == 3.0
    assert value(samples, "gputop_training_flops_per_step", **job) == 1.224e12
    assert value(samples, "gputop_training_peak_flops_per_second", **job) == 989.5e12
    assert value(samples, "gputop_training_energy_per_sample_joules", **job) == 0.171875
    assert value(samples, "gputop_training_power_watts", **job) == 275.0


def test_a_step_figure_the_probe_could_not_have_has_no_sample() -> None:
    samples = scrape(snapshot(training=(training_view(),)))  # no drift yet, no copies seen, no FLOPs counted

    found = {s.name for s in samples}
    assert "gputop_training_steps_total" in found
    assert (
        not {
            "gputop_training_step_drift_ratio",
            "gputop_training_h2d_bytes_per_step",
            "gputop_training_syncs_per_step",
            "gputop_training_flops_per_step",
            "gputop_training_power_watts",
        }
        & found
    )


def test_dcgm_labels_join_every_gpu_series_under_dcgm_exporters_names() -> None:
    samples = scrape(snapshot(), dcgm_hostname="gpu-node-07")

    gpu_series = [s for s in samples if "uuid" in s.labels and "name" in s.labels]
    assert {"gputop_gpu_up", "gputop_gpu_memory_used_bytes", "gputop_gpu_throttle_reason"} <= {
        s.name for s in gpu_series
    }
    for s in gpu_series:
        assert (s.labels["UUID"], s.labels["modelName"], s.labels["Hostname"]) == (UUID, NAME, "gpu-node-07"), s
        assert (s.labels["gpu"], s.labels["uuid"], s.labels["name"]) == ("0", UUID, NAME), s


def test_dcgm_labels_add_no_series_and_leave_host_and_process_series_alone() -> None:
    plain = scrape(snapshot(), per_process=True)
    labelled = scrape(snapshot(), dcgm_hostname="gpu-node-07", per_process=True)

    assert len(labelled) == len(plain)
    others = [s for s in labelled if "uuid" not in s.labels]
    assert {"gputop_host_cpus", "gputop_process_gpu_memory_bytes"} <= {s.name for s in others}
    assert not [s for s in others if {"UUID", "modelName", "Hostname"} & s.labels.keys()]


def test_without_dcgm_labels_no_gpu_series_carries_a_host_name() -> None:
    samples = scrape(snapshot())

    assert not [s for s in samples if {"UUID", "modelName", "Hostname"} & s.labels.keys()]


def test_a_lost_gpu_keeps_dcgm_labels_on_its_up_series() -> None:
    lost = replace(GPU, state=GPU_LOST_STATE)

    samples = scrape(snapshot(gpus=(lost,)), dcgm_hostname="gpu-node-07")

    assert value(samples, "gputop_gpu_up", UUID=UUID, Hostname="gpu-node-07") == 0


def test_mig_instance_series_keep_their_own_labels() -> None:
    instance = MigInstance(index=0, gpu_instance_id=1, profile="3g.40gb", uuid="MIG-1", memory_total_bytes=40)
    mig = replace(GPU, mig_mode=MIG_ENABLED, mig=(instance,))

    samples = scrape(snapshot(gpus=(mig,)), dcgm_hostname="gpu-node-07")

    [total] = [s for s in samples if s.name == "gputop_mig_memory_total_bytes"]
    assert "UUID" not in total.labels and total.labels["uuid"] == "MIG-1"


def test_dcgm_labels_name_each_gpu_by_its_pci_bus_id_as_dcgm_exporter_does() -> None:
    on_bus = replace(GPU, pci_bus_id="00000000:07:00.0")

    samples = scrape(snapshot(gpus=(on_bus,)), dcgm_hostname="gpu-node-07")

    assert value(samples, "gputop_gpu_up", pci_bus_id="00000000:07:00.0", Hostname="gpu-node-07") == 1


def ranks_of_one_run() -> tuple:
    launch = Launch(rank=0, world_size=2, run_id="run-7", master_addr="10.0.0.1", master_port=29500)
    return tuple(
        replace(
            training_view(pid=4242 + rank, gpu_index=rank, rank=rank),
            evidence=(EVIDENCE_RANK,),
            launch=replace(launch, rank=rank),
        )
        for rank in (0, 1)
    )


def test_each_rank_of_a_job_of_several_has_an_info_series_naming_the_job() -> None:
    snap = snapshot(training=ranks_of_one_run())

    samples = [s for s in scrape(snap) if s.name == "gputop_training_job_info"]

    (job,) = find_jobs(snap)
    assert sorted((s.labels["gpu"], s.labels["rank"], s.labels["job_id"], s.labels["world_size"]) for s in samples) == [
        ("0", "0", job.id, "2"),
        ("1", "1", job.id, "2"),
    ]


def test_a_process_alone_in_its_job_has_no_job_info_series() -> None:
    samples = scrape(snapshot(training=(training_view(),)))

    assert "gputop_training_job_info" not in {s.name for s in samples}
