"""A snapshot as Prometheus metric families: pure, so it is tested with plain model values.

Names follow Prometheus conventions: the ``gputop_`` prefix, base units in the name (bytes, seconds, watts,
hertz, celsius), shares as ratios from 0 to 1, ``_total`` on counters. GPU series carry the labels ``gpu``
(NVML index), ``uuid`` and ``name``. A value that could not be read has no sample at all (never a made-up 0);
a GPU that cannot be read has ``gputop_gpu_up 0``.

Privacy: no series ever carries a command line, an environment variable, a user name or a host process name.
Per-process series (labels ``gpu``, ``pid`` and ``container`` only) exist only when asked for, because every new
PID is a new series in Prometheus.

``snapshot_families`` is the seam for more metrics computed from snapshots: ``advice_families`` turns the advisor's
findings (from a window of snapshots) into families, called next to it in ``SnapshotCollector.collect``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from gputop.breakdown import device_memory
from gputop.jobs import find_jobs

# Every clock-event (throttle) reason of the model is exported as 0 or 1.
from gputop.model import (
    GPU_OK,
    HEALTH_CRITICAL,
    HEALTH_OK,
    HEALTH_WARN,
    MIG_ENABLED,
    THROTTLE_REASONS,
    Advice,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostInfo,
    MigInstance,
    Snapshot,
    TrainingView,
)

GPU_LABELS = ("gpu", "uuid", "name")
PROCESS_LABELS = ("gpu", "pid", "container")
MIG_LABELS = ("gpu", "mig", "gpu_instance", "profile", "uuid")
"""A MIG instance's series: its GPU's index, its slot, its GPU instance id, its profile (``3g.40gb``), its UUID."""
ADVICE_LABELS = ("id", "severity", "pid")
TRAINING_LABELS = ("gpu", "rank")
"""A training process's series: the GPUs its probe's CUDA devices are (NVML indices, ``0,1`` for several; ``cpu``
for a process without CUDA devices), and its launcher rank (empty without a launcher)."""

Number = float | int | None


def ratio(percent: Number) -> float | None:
    """A percentage (0-100) as the 0-1 ratio Prometheus expects."""
    return None if percent is None else percent / 100


def hertz(mhz: Number) -> float | None:
    return None if mhz is None else mhz * 1_000_000


# (metric name, help, how to read it from a Gpu): one gauge each, labelled with GPU_LABELS.
GPU_GAUGES: tuple[tuple[str, str, Callable[[Gpu], Number]], ...] = (
    ("gputop_gpu_memory_total_bytes", "Memory on the GPU.", lambda g: g.memory_total_bytes),
    ("gputop_gpu_memory_used_bytes", "GPU memory allocated by processes.", lambda g: g.memory_used_bytes),
    ("gputop_gpu_memory_free_bytes", "GPU memory free for allocation.", lambda g: g.memory_free_bytes),
    (
        "gputop_gpu_memory_reserved_bytes",
        "GPU memory reserved by the driver and firmware.",
        lambda g: g.memory_reserved_bytes,
    ),
    (
        "gputop_gpu_busy_ratio",
        "Share of the last sample period in which any kernel ran (NVML utilization.gpu); not SM activity.",
        lambda g: ratio(g.utilization_gpu_percent),
    ),
    (
        "gputop_gpu_memory_busy_ratio",
        "Share of the last sample period in which device memory was read or written (NVML utilization.memory).",
        lambda g: ratio(g.utilization_memory_percent),
    ),
    (
        "gputop_gpu_sm_activity_ratio",
        "Share of streaming multiprocessors busy (NVML GPM SM utilization; Hopper and newer).",
        lambda g: ratio(g.sm_activity_percent),
    ),
    (
        "gputop_gpu_sm_occupancy_ratio",
        "Resident warps against the SMs' theoretical maximum (NVML GPM SM occupancy; Hopper and newer).",
        lambda g: ratio(g.sm_occupancy_percent),
    ),
    (
        "gputop_gpu_tensor_activity_ratio",
        "Share of time the SMs ran any tensor-core instruction (NVML GPM; Hopper and newer).",
        lambda g: ratio(g.tensor_activity_percent),
    ),
    (
        "gputop_gpu_dram_bandwidth_ratio",
        "DRAM bandwidth used against its theoretical maximum (NVML GPM; Hopper and newer).",
        lambda g: ratio(g.dram_bandwidth_percent),
    ),
    (
        "gputop_gpu_fp64_activity_ratio",
        "Share of time the SMs ran non-tensor FP64 math (NVML GPM; Hopper and newer).",
        lambda g: ratio(g.fp64_activity_percent),
    ),
    (
        "gputop_gpu_fp32_activity_ratio",
        "Share of time the SMs ran non-tensor FP32 math (NVML GPM; Hopper and newer).",
        lambda g: ratio(g.fp32_activity_percent),
    ),
    (
        "gputop_gpu_fp16_activity_ratio",
        "Share of time the SMs ran non-tensor FP16 math (NVML GPM; Hopper and newer).",
        lambda g: ratio(g.fp16_activity_percent),
    ),
    (
        "gputop_gpu_gpm_pcie_tx_bytes_per_second",
        "PCIe traffic from the GPU between two samples (NVML GPM; Hopper and newer).",
        lambda g: g.gpm_pcie_tx_bytes_per_s,
    ),
    (
        "gputop_gpu_gpm_pcie_rx_bytes_per_second",
        "PCIe traffic to the GPU between two samples (NVML GPM; Hopper and newer).",
        lambda g: g.gpm_pcie_rx_bytes_per_s,
    ),
    (
        "gputop_gpu_nvlink_tx_bytes_per_second",
        "NVLink traffic written over all links (NVML GPM; Hopper and newer).",
        lambda g: g.nvlink_tx_bytes_per_s,
    ),
    (
        "gputop_gpu_nvlink_rx_bytes_per_second",
        "NVLink traffic read over all links (NVML GPM; Hopper and newer).",
        lambda g: g.nvlink_rx_bytes_per_s,
    ),
    ("gputop_gpu_temperature_celsius", "GPU core temperature.", lambda g: g.temperature_c),
    ("gputop_gpu_power_watts", "Power drawn by the GPU.", lambda g: g.power_w),
    ("gputop_gpu_power_limit_watts", "Power limit the driver enforces.", lambda g: g.power_limit_w),
    ("gputop_gpu_fan_speed_ratio", "Fan speed as a share of its maximum.", lambda g: ratio(g.fan_percent)),
    ("gputop_gpu_performance_state", "Performance state: 0 (P0) is the fastest, 15 the slowest.", lambda g: g.pstate),
    ("gputop_gpu_sm_clock_hertz", "SM clock.", lambda g: hertz(g.clock_sm_mhz)),
    ("gputop_gpu_memory_clock_hertz", "Memory clock.", lambda g: hertz(g.clock_mem_mhz)),
    ("gputop_gpu_sm_clock_max_hertz", "Highest SM clock the GPU supports.", lambda g: hertz(g.clock_sm_max_mhz)),
    (
        "gputop_gpu_memory_clock_max_hertz",
        "Highest memory clock the GPU supports.",
        lambda g: hertz(g.clock_mem_max_mhz),
    ),
)

# (metric name without _total, help, how to read it from a Gpu): one counter each, labelled with GPU_LABELS.
GPU_COUNTERS: tuple[tuple[str, str, Callable[[Gpu], Number]], ...] = (
    (
        "gputop_gpu_ecc_uncorrected_errors",
        "Uncorrected ECC errors since the driver was loaded (volatile count).",
        lambda g: g.ecc_uncorrected_volatile,
    ),
    (
        "gputop_gpu_energy_joules",
        "Energy the GPU used since the driver was loaded (NVML's total energy counter; Volta and newer).",
        lambda g: g.energy_j,
    ),
)

MIG_GAUGES: tuple[tuple[str, str, Callable[[MigInstance], Number]], ...] = (
    ("gputop_mig_memory_total_bytes", "Memory of the MIG instance.", lambda m: m.memory_total_bytes),
    ("gputop_mig_memory_used_bytes", "Memory of the MIG instance in use.", lambda m: m.memory_used_bytes),
    ("gputop_mig_multiprocessors", "Streaming multiprocessors of the MIG instance.", lambda m: m.multiprocessor_count),
    (
        "gputop_mig_sm_activity_ratio",
        "Share of the MIG instance's SMs busy (NVML GPM for its GPU instance; Hopper and newer).",
        lambda m: ratio(m.sm_activity_percent),
    ),
    (
        "gputop_mig_tensor_activity_ratio",
        "Share of time the MIG instance's SMs ran tensor instructions (NVML GPM; Hopper and newer).",
        lambda m: ratio(m.tensor_activity_percent),
    ),
)

PROCESS_GAUGES: tuple[tuple[str, str, Callable[[GpuProcess], Number]], ...] = (
    ("gputop_process_gpu_memory_bytes", "GPU memory the process holds on this GPU.", lambda p: p.gpu_memory_bytes),
    (
        "gputop_process_sm_ratio",
        "Share of the GPU's SM time this process used over the last sample period.",
        lambda p: ratio(p.sm_percent),
    ),
    (
        "gputop_process_memory_busy_ratio",
        "Share of the GPU's memory read/write time this process used over the last sample period.",
        lambda p: ratio(p.memory_bandwidth_percent),
    ),
    (
        "gputop_process_start_time_seconds",
        "Start time of the process (Unix time).",
        lambda p: None if p.host is None else p.host.start_time,
    ),
)


def snapshot_families(snap: Snapshot, per_process: bool = False) -> list[Metric]:
    """Every metric family of one snapshot. Families without a sample are left out."""
    families = [*driver_families(snap.driver), *gpu_families(snap.gpus), *mig_families(snap.gpus)]
    families += health_families(snap.gpus)
    families += host_families(snap.host)
    families.append(torch_memory_family(snap.training, per_process))
    families += training_families(snap.training, per_process)
    families.append(job_info_family(snap, per_process))
    if per_process:
        families += process_families(snap.processes)
        families.append(pod_info_family(snap.processes))
    return [f for f in families if f.samples]


JOB_INFO = "gputop_training_job_info"
JOB_INFO_LABELS = ("job_id", "world_size")


def job_info_family(snap: Snapshot, per_process: bool = False) -> GaugeMetricFamily:
    """``gputop_training_job_info{gpu, rank, job_id, world_size}``: 1 for each rank of a job of several ranks
    (``gputop.jobs``), so that the ranks of one distributed job join across hosts on ``job_id``: a torchrun job's id
    is made of its run's identity (``TORCHELASTIC_RUN_ID``, ``MASTER_ADDR``, ``MASTER_PORT``, the user), the same on
    every host it runs on. Its own series, joined by ``gpu`` and ``rank``, never labels on every training series."""
    labels = (*TRAINING_LABELS, *JOB_INFO_LABELS, *(("pid",) if per_process else ()))
    family = GaugeMetricFamily(
        JOB_INFO, "1 for each rank of a training job of several ranks, named by the job's id.", labels=labels
    )
    seen: set[tuple[str, ...]] = set()
    for job in find_jobs(snap):
        if len(job.ranks) < 2 and not (job.world_size or 0) > 1:
            continue
        world = "" if job.world_size is None else str(job.world_size)
        for rank in job.ranks:
            gpu, number, *pid = training_labels(rank.view, per_process)
            key = (gpu, number, *pid)
            if key not in seen:
                seen.add(key)
                family.add_metric([gpu, number, job.id, world, *pid], 1)
    return family


def torch_memory_family(views: Sequence[TrainingView], per_process: bool = False) -> GaugeMetricFamily:
    """``gputop_torch_memory_bytes{gpu, part}``: the memory of the training processes the probe reports on, by
    part (docs/memory.md), summed over the processes on each GPU (``gpu="cpu"`` for tensors in host memory); with
    ``per_process`` one series per process, labelled with its PID too."""
    labels: tuple[str, ...] = ("gpu", "part", "pid") if per_process else ("gpu", "part")
    sums: dict[tuple[str, ...], int] = {}
    for view in views:
        for device in device_memory(view.probe):
            gpu = "cpu" if device.device == "cpu" else "" if device.gpu_index is None else str(device.gpu_index)
            for part, size in device.parts():
                if size is not None:
                    key = (gpu, part, str(view.pid)) if per_process else (gpu, part)
                    sums[key] = sums.get(key, 0) + size
    family = GaugeMetricFamily(
        "gputop_torch_memory_bytes",
        "Memory of the training processes by part: weights, gradients, optimizer, other, activations, cache, "
        "outside (PyTorch's view through the probe, NVML's for outside).",
        labels=labels,
    )
    for labelled, size in sums.items():
        family.add_metric(list(labelled), size)
    return family


# (metric name, help, how to read it from a training view): one gauge each, labelled with TRAINING_LABELS.
TRAINING_GAUGES: tuple[tuple[str, str, Callable[[TrainingView], Number]], ...] = (
    (
        "gputop_training_steps_per_second",
        "Training steps a second over the probe's window.",
        lambda v: v.probe.step.steps_per_s if v.probe.step else None,
    ),
    (
        "gputop_training_samples_per_second",
        "Samples a second over the probe's window (steps times the batch size).",
        lambda v: v.probe.step.samples_per_s if v.probe.step else None,
    ),
    (
        "gputop_training_step_seconds",
        "Median time of a training step over the probe's window.",
        lambda v: v.probe.step.step_s if v.probe.step else None,
    ),
    (
        "gputop_training_step_p95_seconds",
        "95th percentile of the training steps over the probe's window.",
        lambda v: v.probe.step.step_p95_s if v.probe.step else None,
    ),
    (
        "gputop_training_step_drift_ratio",
        "The window's median step over the first steady window's (1: no change; above 1: steps got slower).",
        lambda v: v.probe.step.drift if v.probe.step else None,
    ),
    (
        "gputop_training_data_wait_ratio",
        "Share of the training loop's time spent waiting for the next batch (the DataLoader it iterates now).",
        lambda v: v.loader.data_wait_share if v.loader else None,
    ),
    (
        "gputop_training_worker_batch_seconds",
        "Seconds one DataLoader worker spends making a batch, timed inside the workers (the DataLoader the loop "
        "iterates now).",
        lambda v: v.loader.worker_batch_s if v.loader else None,
    ),
    (
        "gputop_training_worker_batch_p95_seconds",
        "Seconds under which a DataLoader worker makes 95 % of its batches (to a quarter-octave), timed inside the "
        "workers: the slow batches the prefetch queue must cover.",
        lambda v: v.loader.worker_batch_p95_s if v.loader else None,
    ),
    (
        "gputop_training_h2d_bytes_per_step",
        "Bytes a training step copies from the host to the GPU.",
        lambda v: v.probe.step.h2d_bytes_per_step if v.probe.step else None,
    ),
    (
        "gputop_training_h2d_pageable_ratio",
        "Share of the bytes copied to the GPU whose source was pageable (not pinned) memory.",
        lambda v: v.probe.step.h2d_pageable_share if v.probe.step else None,
    ),
    (
        "gputop_training_h2d_blocking_ratio",
        "Share of the bytes copied to the GPU without non_blocking=True.",
        lambda v: v.probe.step.h2d_blocking_share if v.probe.step else None,
    ),
    (
        "gputop_training_syncs_per_step",
        "Host-device synchronisations a training step makes (.item(), .cpu(), ...), over the probe's sampled steps.",
        lambda v: v.probe.step.syncs_per_step if v.probe.step else None,
    ),
    (
        "gputop_training_flops_per_step",
        "Floating-point operations of one training step, forward and backward, as the probe counted or estimated them.",
        lambda v: v.probe.step.flops_per_step if v.probe.step else None,
    ),
    (
        "gputop_training_achieved_flops_per_second",
        "FLOP/s the job achieves: the probe's FLOPs per step times steps a second.",
        lambda v: None if v.cost is None or v.cost.achieved_tflops is None else v.cost.achieved_tflops * 1e12,
    ),
    (
        "gputop_training_peak_flops_per_second",
        "Dense peak FLOP/s of the job's GPUs at the precision in use: what the MFU is measured against.",
        lambda v: None if v.cost is None or v.cost.peak_tflops is None else v.cost.peak_tflops * 1e12,
    ),
    (
        "gputop_training_mfu_ratio",
        "Model FLOPs utilisation: achieved FLOP/s over the GPUs' dense peak for the precision in use.",
        lambda v: v.cost.mfu if v.cost else None,
    ),
    (
        "gputop_training_energy_per_step_joules",
        "GPU energy a training step takes: the GPUs' mean power over steps a second (alone on its GPUs only).",
        lambda v: v.cost.energy_per_step_j if v.cost else None,
    ),
    (
        "gputop_training_energy_per_sample_joules",
        "GPU energy a training sample takes: the energy of a step over the batch size.",
        lambda v: v.cost.energy_per_sample_j if v.cost else None,
    ),
    (
        "gputop_training_power_watts",
        "Mean power of the job's GPUs over the last 5 to 30 s, from NVML's energy counter.",
        lambda v: v.cost.power_w if v.cost else None,
    ),
)


def training_families(views: Sequence[TrainingView], per_process: bool = False) -> list[Metric]:
    """The step anatomy and cost of each training process the probe reports a step for. One series per GPU and
    rank (with ``per_process``, per PID too); where two processes share both (two CPU jobs without a launcher), the
    first in the snapshot's order."""
    labels: tuple[str, ...] = (*TRAINING_LABELS, "pid") if per_process else TRAINING_LABELS
    labelled: dict[tuple[str, ...], TrainingView] = {}
    for view in views:
        if view.probe.step is not None:
            labelled.setdefault(training_labels(view, per_process), view)
    families: list[Metric] = [
        _gauge(name, help_text, labels, ((list(key), read(v)) for key, v in labelled.items()))
        for name, help_text, read in TRAINING_GAUGES
    ]
    steps = CounterMetricFamily(
        "gputop_training_steps", "Training steps the probe has timed since the job started.", labels=labels
    )
    for key, view in labelled.items():
        if view.probe.step is not None:
            steps.add_metric(list(key), view.probe.step.steps)
    families.append(steps)
    phases = GaugeMetricFamily(
        "gputop_training_phase_seconds",
        "Mean seconds a training step spends in each phase: data, h2d, forward, backward, optimizer, collective, "
        "other.",
        labels=(*labels, "phase"),
    )
    for key, view in labelled.items():
        for phase, seconds in view.probe.step.phases_s if view.probe.step else ():
            phases.add_metric([*key, phase], seconds)
    families.append(phases)
    return families


def training_labels(view: TrainingView, per_process: bool = False) -> tuple[str, ...]:
    indices = sorted({d.gpu_index for d in view.probe.cuda if d.gpu_index is not None})
    gpu = ",".join(map(str, indices)) if indices else "" if view.probe.cuda else "cpu"
    rank = view.launch.rank if view.launch is not None else view.probe.rank
    labels = (gpu, "" if rank is None else str(rank))
    return (*labels, str(view.pid)) if per_process else labels


DCGM_LABELS = (("UUID", "uuid"), ("modelName", "name"))
"""dcgm-exporter's names for two of gputop's GPU labels, and gputop's: with ``--dcgm-labels`` every GPU series
carries both, ``pci_bus_id`` and ``Hostname`` (docs/exporter.md#beside-dcgm-exporter)."""
DCGM_HOSTNAME = "Hostname"
DCGM_PCI_BUS_ID = "pci_bus_id"


def dcgm_labelled(families: Iterable[Metric], hostname: str, gpus: Iterable[Gpu] = ()) -> list[Metric]:
    """``families`` with dcgm-exporter's label names added beside gputop's on every GPU series (those labelled
    ``gpu``, ``uuid`` and ``name``), so that ``on(UUID)`` or ``on(pci_bus_id, Hostname)`` joins the two exporters'
    series. ``pci_bus_id`` is the bus id of the GPU of ``gpus`` with the series' UUID, empty (no label, to
    Prometheus) where the driver did not give one. The series stay as many: each gains labels, none is added."""
    bus_ids = {g.uuid: g.pci_bus_id or "" for g in gpus if g.uuid is not None}
    labelled = []
    for family in families:
        samples = family.samples
        if samples and set(GPU_LABELS) <= samples[0].labels.keys():
            family.samples = [
                s._replace(
                    labels={
                        **s.labels,
                        **{dcgm: s.labels[ours] for dcgm, ours in DCGM_LABELS},
                        DCGM_PCI_BUS_ID: bus_ids.get(s.labels["uuid"], ""),
                        DCGM_HOSTNAME: hostname,
                    }
                )
                for s in samples
            ]
        labelled.append(family)
    return labelled


def driver_families(driver: DriverInfo) -> list[Metric]:
    up = GaugeMetricFamily("gputop_driver_up", "Whether NVML answered (1) or not (0).", value=int(driver.ok))
    versions = {
        "driver_version": driver.driver_version,
        "cuda_version": driver.cuda_version,
        "nvml_version": driver.nvml_version,
    }
    known = {key: value for key, value in versions.items() if value is not None}
    if not known:
        return [up]
    return [up, InfoMetricFamily("gputop_driver", "NVIDIA driver, CUDA and NVML versions.", value=known)]


def gpu_labels(gpu: Gpu) -> list[str]:
    return [str(gpu.index), gpu.uuid or "", gpu.name or ""]


def gpu_families(gpus: Sequence[Gpu]) -> list[Metric]:
    up = GaugeMetricFamily(
        "gputop_gpu_up", "Whether the GPU could be read (1) or is lost or failing (0).", labels=GPU_LABELS
    )
    for g in gpus:
        up.add_metric(gpu_labels(g), int(g.state == GPU_OK))
    families: list[Metric] = [up]
    for name, help_text, read in GPU_GAUGES:
        families.append(_gauge(name, help_text, GPU_LABELS, ((gpu_labels(g), read(g)) for g in gpus)))
    families.append(
        _gauge(
            "gputop_gpu_pcie_bytes_per_second",
            "PCIe throughput; direction rx is host to GPU, tx is GPU to host.",
            (*GPU_LABELS, "direction"),
            (
                pair
                for g in gpus
                for pair in (
                    ([*gpu_labels(g), "rx"], g.pcie_rx_bytes_per_s),
                    ([*gpu_labels(g), "tx"], g.pcie_tx_bytes_per_s),
                )
            ),
        )
    )
    throttle = GaugeMetricFamily(
        "gputop_gpu_throttle_reason",
        "Whether a clock-event (throttle) reason is active (1) or not (0).",
        labels=(*GPU_LABELS, "reason"),
    )
    for g in gpus:
        if g.throttle_reasons is not None:
            for reason in THROTTLE_REASONS:
                throttle.add_metric([*gpu_labels(g), reason], int(reason in g.throttle_reasons))
    families.append(throttle)
    for name, help_text, read in GPU_COUNTERS:
        counter = CounterMetricFamily(name, help_text, labels=GPU_LABELS)
        for g in gpus:
            count = read(g)
            if count is not None:
                counter.add_metric(gpu_labels(g), count)
        families.append(counter)
    return families


# -- GPU health (gputop.health): the state, and the counters it is judged from -----------------------------------

HEALTH_VALUES = {HEALTH_OK: 0, HEALTH_WARN: 1, HEALTH_CRITICAL: 2}


def health_families(gpus: Sequence[Gpu]) -> list[Metric]:
    """``gputop_gpu_health`` (0 ok, 1 warn, 2 critical), Xids by number, remapped rows, retired pages, PCIe replays
    and time under each clock limit. A counter the GPU does not have has no sample."""
    judged = [(gpu_labels(g), g.health) for g in gpus if g.health is not None]
    state = GaugeMetricFamily(
        "gputop_gpu_health", "The GPU's health: 0 ok, 1 warn, 2 critical (docs/health.md).", labels=GPU_LABELS
    )
    xids = CounterMetricFamily(
        "gputop_gpu_xid_errors", "Xid errors the GPU reported while gputop watched.", labels=(*GPU_LABELS, "xid")
    )
    replays = CounterMetricFamily(
        "gputop_gpu_pcie_replays", "PCIe replays since the driver was loaded.", labels=GPU_LABELS
    )
    limited = CounterMetricFamily(
        "gputop_gpu_clock_limit_seconds",
        "Time the clocks were held below application clocks, per NVML perf policy, since the driver was loaded.",
        labels=(*GPU_LABELS, "policy"),
    )
    for labels, h in judged:
        state.add_metric(labels, HEALTH_VALUES[h.state])
        for seen in h.xids:
            xids.add_metric([*labels, str(seen.xid)], seen.count)
        if h.pcie_replays is not None:
            replays.add_metric(labels, h.pcie_replays)
        for policy, seconds in h.violation_s:
            limited.add_metric([*labels, policy], seconds)
    rows = _gauge(
        "gputop_gpu_remapped_rows",
        "Memory rows remapped, by the kind of error that caused it (Ampere and later data-centre GPUs).",
        (*GPU_LABELS, "kind"),
        (
            pair
            for labels, h in judged
            for pair in (
                ([*labels, "correctable"], h.remapped_rows_correctable),
                ([*labels, "uncorrectable"], h.remapped_rows_uncorrectable),
            )
        ),
    )
    pages = _gauge(
        "gputop_gpu_retired_pages",
        "Memory pages retired, by cause (GPUs that retire pages).",
        (*GPU_LABELS, "cause"),
        (
            pair
            for labels, h in judged
            for pair in (
                ([*labels, "single_bit"], h.retired_pages_single_bit),
                ([*labels, "double_bit"], h.retired_pages_double_bit),
            )
        ),
    )
    flags = [
        _gauge(name, help_text, GPU_LABELS, ((labels, None if v is None else int(v)) for labels, v in values))
        for name, help_text, values in (
            (
                "gputop_gpu_remapped_rows_pending",
                "Whether a row remapping waits for a GPU reset (1) or not (0).",
                [(labels, h.remapped_rows_pending) for labels, h in judged],
            ),
            (
                "gputop_gpu_remapped_rows_failed",
                "Whether a row remapping failed (1): the GPU needs servicing.",
                [(labels, h.remapped_rows_failed) for labels, h in judged],
            ),
            (
                "gputop_gpu_retired_pages_pending",
                "Whether a page waits to be retired at the next driver reload (1) or not (0).",
                [(labels, h.retired_pages_pending) for labels, h in judged],
            ),
        )
    ]
    return [state, xids, rows, *flags, pages, replays, limited]


def mig_labels(gpu: Gpu, instance: MigInstance) -> list[str]:
    gi = "" if instance.gpu_instance_id is None else str(instance.gpu_instance_id)
    return [str(gpu.index), str(instance.index), gi, instance.profile or "", instance.uuid or ""]


def mig_families(gpus: Sequence[Gpu]) -> list[Metric]:
    """Whether each GPU is in MIG mode (where it has MIG), and each instance's memory and activity."""
    enabled = GaugeMetricFamily(
        "gputop_gpu_mig_enabled", "Whether the GPU is partitioned into MIG instances (1) or not (0).", labels=GPU_LABELS
    )
    for g in gpus:
        if g.mig_mode is not None:
            enabled.add_metric(gpu_labels(g), int(g.mig_mode == MIG_ENABLED))
    instances = [(g, m) for g in gpus if g.state == GPU_OK for m in g.mig]
    families: list[Metric] = [enabled]
    for name, help_text, read in MIG_GAUGES:
        families.append(_gauge(name, help_text, MIG_LABELS, ((mig_labels(g, m), read(m)) for g, m in instances)))
    return families


def host_families(host: HostInfo) -> list[Metric]:
    load = host.load_average or (None, None, None)
    values: tuple[tuple[str, str, Number], ...] = (
        (
            "gputop_host_cpu_busy_ratio",
            "Share of all CPUs' time spent busy over the last tick.",
            ratio(host.cpu_percent),
        ),
        ("gputop_host_cpus", "Logical CPUs in the machine.", host.cpu_count),
        ("gputop_host_usable_cpus", "CPUs gputop may run on (its affinity mask).", host.usable_cpu_count),
        ("gputop_host_load1", "Load average over 1 minute.", load[0]),
        ("gputop_host_load5", "Load average over 5 minutes.", load[1]),
        ("gputop_host_load15", "Load average over 15 minutes.", load[2]),
        ("gputop_host_memory_total_bytes", "Host memory.", host.memory_total_bytes),
        ("gputop_host_memory_used_bytes", "Host memory in use.", host.memory_used_bytes),
        (
            "gputop_host_memory_available_bytes",
            "Host memory available to new work without swapping.",
            host.memory_available_bytes,
        ),
        ("gputop_host_swap_total_bytes", "Swap space.", host.swap_total_bytes),
        ("gputop_host_swap_used_bytes", "Swap space in use.", host.swap_used_bytes),
    )
    return [_gauge(name, help_text, (), [([], value)]) for name, help_text, value in values]


def process_families(processes: Sequence[GpuProcess]) -> list[Metric]:
    """Per-process series, labelled by GPU index, PID and container only: no user, name or command line."""
    labels = [[str(p.gpu_index), str(p.pid), container_label(p)] for p in processes]
    return [
        _gauge(name, help_text, PROCESS_LABELS, ((label, read(p)) for label, p in zip(labels, processes)))
        for name, help_text, read in PROCESS_GAUGES
    ]


POD_INFO_LABELS = ("pid", "namespace", "pod", "container", "pod_uid")


def pod_info_family(processes: Sequence[GpuProcess]) -> GaugeMetricFamily:
    """``gputop_process_pod_info``: 1 for each GPU process whose pod is known by name, labelled with the names,
    to join on ``pid`` (``* on(pid) group_left(namespace, pod, container)``): the names go on one series per
    process, not on every series of it (docs/exporter.md)."""
    samples: dict[str, list[str]] = {}
    for p in processes:
        pod = p.host.pod if p.host is not None else None
        if pod is not None and p.host is not None:
            uid = p.host.container.pod_uid if p.host.container is not None else None
            samples.setdefault(str(p.pid), [str(p.pid), pod.namespace, pod.name, pod.container or "", uid or ""])
    return _gauge(
        "gputop_process_pod_info",
        "The Kubernetes pod and container of a GPU process, by name, as the node's API server or kubelet names "
        "them (1 per process whose pod is known).",
        POD_INFO_LABELS,
        ((labels, 1) for labels in samples.values()),
    )


def container_label(p: GpuProcess) -> str:
    """The container or job the process runs in, in the dashboard's words (``docker a1b2c3d4e5f6``, ``slurm job
    123``); empty, which Prometheus reads as no label, for none, a systemd unit or a cgroup of its own (a path
    named by anyone, and a series per unit on every host)."""
    container = p.host.container if p.host is not None else None
    return container.label if container is not None and container.contained else ""


def advice_families(advice: Sequence[Advice], per_process: bool = False) -> list[Metric]:
    """The advisor's active findings (docs/advisor.md). A finding that clears leaves no series, so an alert can fire
    on a series being present.

    By default ``gputop_advice_active`` counts the processes with each finding, labelled by rule id and severity.
    With ``per_process`` it is one series per finding, labelled with the PID too, and the numbers a finding
    suggests (``num_workers``, ``batch_size``...) are exported as ``gputop_advice_suggested_value``.
    """
    labels = ADVICE_LABELS if per_process else ADVICE_LABELS[:2]
    active = GaugeMetricFamily(
        "gputop_advice_active",
        "Training processes with an active finding of the advisor" + (" (1 per process)." if per_process else "."),
        labels=labels,
    )
    suggested = GaugeMetricFamily(
        "gputop_advice_suggested_value",
        "A numeric setting an active finding suggests for a process, such as num_workers or batch_size.",
        labels=("id", "pid", "setting"),
    )
    counts: dict[tuple[str, ...], int] = {}
    for a in advice:
        key: tuple[str, ...] = (a.id, a.severity, str(a.pid)) if per_process else (a.id, a.severity)
        counts[key] = counts.get(key, 0) + 1
        if per_process:
            for setting, value in a.suggest.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    suggested.add_metric([a.id, str(a.pid), setting], value)
    for key, count in counts.items():
        active.add_metric(list(key), count)
    return [f for f in (active, suggested) if f.samples]


def _gauge(
    name: str, help_text: str, labels: Sequence[str], samples: Iterable[tuple[list[str], Number]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=labels)
    for label_values, value in samples:
        if value is not None:
            family.add_metric(label_values, value)
    return family
