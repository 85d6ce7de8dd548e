"""Plain model values for the advisor's tests: a training process, its GPU, and windows of samples over time."""

from __future__ import annotations

from collections.abc import Callable

from gputop.advisor.samples import JobSample, current_loader
from gputop.advisor.window import JobWindow
from gputop.model import (
    DRIVER_OK,
    EVIDENCE_TORCH_THREADS,
    PHASES,
    PIN_OFF,
    PROBE_NONE,
    PROBE_OK,
    CudaMemory,
    DriverInfo,
    Evidence,
    Gpu,
    GpuProcess,
    HostInfo,
    HostProcess,
    LoaderConfig,
    LoaderView,
    MainThread,
    Phase,
    PinMemoryStatus,
    ProbeReport,
    Snapshot,
    StepAnatomy,
    StepClock,
    StepCost,
    SyncSite,
    TrainingView,
    Worker,
)
from tests.factories import host_info

GIB = 1024**3
MIB = 1024**2
PID = 4242


def host(cpu_percent: float = 50.0, cores: int = 8, available_gib: float = 48) -> HostInfo:
    return host_info(cpu_percent=cpu_percent, cores=cores, used_gib=64 - available_gib)


def loader(
    wait: float = 0.0,
    steps: float = 10.0,
    workers: int = 2,
    batch: int = 32,
    pin: bool = False,
    requested_pin: bool | None = None,
    persistent: bool = True,
    batches: int = 1000,
    pass_start_s: float | None = None,
    waiting_now_s: float | None = None,
    passes: int = 1,
    pass_start_wait_share: float | None = None,
    created_at: str | None = None,
    worker_batch_s: float | None = None,
    worker_batch_p95_s: float | None = None,
    prefetch: int | None = None,
) -> LoaderView:
    effective = LoaderConfig(
        batch_size=batch,
        num_workers=workers,
        pin_memory=pin,
        persistent_workers=persistent,
        prefetch_factor=prefetch,
    )
    requested = LoaderConfig(
        batch_size=batch,
        num_workers=workers,
        pin_memory=pin if requested_pin is None else requested_pin,
        persistent_workers=persistent,
    )
    return LoaderView(
        loader_id=1,
        requested=requested,
        effective=effective,
        passes=passes,
        batches=batches,
        data_wait_share=wait,
        steps_per_s=steps,
        samples_per_s=steps * batch,
        waiting_now_s=waiting_now_s,
        last_batch_age_s=0.05,
        pass_start_s=pass_start_s,
        pass_start_wait_share=pass_start_wait_share,
        created_at=created_at,
        worker_batch_s=worker_batch_s,
        worker_batch_p95_s=worker_batch_p95_s,
    )


def workers(count: int, cpu: float = 2.0, status: str = "sleeping", uss_mib: float = 100, first: int = 5000):
    return tuple(
        Worker(HostProcess(first + n, PID, status=status, cpu_percent=cpu), uss_bytes=int(uss_mib * MIB))
        for n in range(count)
    )


def device(
    allocated_gib: float = 4,
    reserved_gib: float | None = None,
    peak_gib: float | None = None,
    reserved_peak_gib: float | None = None,
    retries: int = 0,
    ooms: int = 0,
    frees: int = 0,
    nvml_gib: float | None = None,
) -> CudaMemory:
    reserved = reserved_gib if reserved_gib is not None else allocated_gib
    return CudaMemory(
        device=0,
        gpu_index=0,
        allocated_bytes=int(allocated_gib * GIB),
        reserved_bytes=int(reserved * GIB),
        allocated_peak_bytes=int((peak_gib if peak_gib is not None else allocated_gib) * GIB),
        reserved_peak_bytes=int((reserved_peak_gib if reserved_peak_gib is not None else reserved) * GIB),
        num_alloc_retries=retries,
        num_ooms=ooms,
        num_device_free=frees,
        nvml_process_bytes=None if nvml_gib is None else int(nvml_gib * GIB),
    )


def view(
    load: LoaderView | None = None,
    worker_list: tuple[Worker, ...] = (),
    pin: str = PIN_OFF,
    main_busy: float | None = 0.3,
    main_cpu: float | None = None,
    main_status: str = "sleeping",
    wait_channel: str | None = None,
    cuda: tuple[CudaMemory, ...] = (),
    workers_replaced: int = 0,
    usable: int | None = None,
    pid: int = PID,
    evidence: tuple[Evidence, ...] = (EVIDENCE_TORCH_THREADS,),
    anatomy: StepAnatomy | None = None,
    cost: StepCost | None = None,
) -> TrainingView:
    """A training process as the collector sees it; ``evidence`` says why it is one (torch named its threads,
    unless told otherwise: empty makes a plain GPU process). A probe report is made where there is a loader, CUDA
    memory or a step ``anatomy`` to report."""
    reported = load or cuda or anatomy
    probe = ProbeReport(PROBE_OK, loaders=(load,) if load else (), cuda=cuda, step=anatomy) if reported else None
    cpu = [w.host.cpu_percent for w in worker_list if w.host.cpu_percent is not None]
    return TrainingView(
        pid=pid,
        workers=worker_list,
        workers_cpu_percent=sum(cpu) if cpu else None,
        usable_cpu_count=usable,
        workers_replaced=workers_replaced,
        pin_memory=PinMemoryStatus(pin, f"{len(worker_list)} workers and no pt_data_pin thread", "threads"),
        main_thread=MainThread(
            status=main_status,
            wait_channel=wait_channel,
            busy_share=main_busy,
            cpu_percent=main_cpu,
            activity=None if main_busy is None else "running" if main_busy > 0.75 else "waiting",
        ),
        probe=probe or ProbeReport(PROBE_NONE),
        evidence=evidence,
        cost=cost,
    )


def step(
    clock: StepClock = "cuda",
    step_s: float | None = None,
    p95_s: float | None = None,
    warmup_s: float | None = None,
    drift: float | None = 1.0,
    h2d_bytes: int | None = None,
    pageable: float | None = None,
    blocking: float | None = None,
    syncs: tuple[SyncSite, ...] = (),
    flops: float | None = None,
    **phases: float,
) -> StepAnatomy:
    """The probe's step anatomy with ``phases`` in seconds (``forward=0.02``); the median step is their sum unless
    ``step_s`` says otherwise, and the 95th percentile 5 % above it."""
    timed: tuple[tuple[Phase, float], ...] = tuple((p, phases[p]) for p in PHASES if p in phases)
    median = step_s if step_s is not None else sum(phases.values())
    return StepAnatomy(
        boundary="DataLoader",
        clock=clock,
        steps=1000,
        window_s=10.0,
        window_steps=int(10 / median) if median else 0,
        step_s=median,
        step_p95_s=p95_s if p95_s is not None else median * 1.05,
        warmup_step_s=warmup_s if warmup_s is not None else median,
        drift=drift,
        steps_per_s=1 / median if median else None,
        phases_s=timed,
        h2d_bytes_per_step=h2d_bytes,
        h2d_pageable_share=pageable,
        h2d_blocking_share=blocking,
        syncs_per_step=sum(s.per_step for s in syncs) if clock == "cuda" else None,
        sync_sites=syncs,
        sync_sampled_steps=20 if clock == "cuda" else 0,
        flops_per_step=flops,
        flops_source="counted" if flops is not None else None,
    )


def gpu(
    busy: float | None = 90.0,
    used_gib: float = 40,
    sm: float | None = None,
    reasons: tuple[str, ...] = (),
    clock: int = 1755,
    rx_bytes_per_s: int | None = None,
    occupancy: float | None = None,
    tensor: float | None = None,
    fp32: float | None = None,
) -> Gpu:
    return Gpu(
        index=0,
        uuid="GPU-0",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=80 * GIB,
        memory_used_bytes=int(used_gib * GIB),
        memory_free_bytes=int((80 - used_gib) * GIB),
        utilization_gpu_percent=busy,
        sm_activity_percent=sm,
        temperature_c=61,
        power_w=690.0,
        power_limit_w=700.0,
        clock_sm_mhz=clock,
        clock_sm_max_mhz=1980,
        pcie_rx_bytes_per_s=rx_bytes_per_s,
        throttle_reasons=reasons,
        sm_occupancy_percent=occupancy,
        tensor_activity_percent=tensor,
        fp32_activity_percent=fp32,
    )


def row(pid: int = PID, gib: float = 20) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_index=0, kind="compute", gpu_memory_bytes=int(gib * GIB))


def sample(
    t: float,
    training: TrainingView,
    gpus: tuple[Gpu, ...] = (),
    rows: tuple[GpuProcess, ...] | None = None,
    worker_rows: tuple[GpuProcess, ...] = (),
    machine: HostInfo | None = None,
    rss: int | None = None,
    age_s: float = 3600.0,
    local_ranks: int = 1,
    process_cpu: float | None = None,
) -> JobSample:
    """A sample of ``training``; given GPUs, the process is on them with 20 GiB unless ``rows`` says otherwise;
    ``process_cpu``: the training process's own CPU, in % of a core."""
    return JobSample(
        time=t,
        view=training,
        host=machine or host(),
        gpus=gpus,
        gpu_rows=rows if rows is not None else (row(),) if gpus else (),
        worker_gpu_rows=worker_rows,
        rss_bytes=rss,
        age_s=age_s,
        local_ranks=local_ranks,
        loader=current_loader(training),
        process=None if process_cpu is None else HostProcess(training.pid, 1, cpu_percent=process_cpu),
    )


def window(make: Callable[[float], JobSample], seconds: float = 10.0, every_s: float = 0.5) -> JobWindow:
    """Samples from ``make(t)`` every ``every_s`` for ``seconds``, t counting from 0."""
    steps = int(seconds / every_s) + 1
    return JobWindow(tuple(make(round(n * every_s, 6)) for n in range(steps)))


def snapshot(t: float, training: TrainingView, gpus: tuple[Gpu, ...] = (), rows: tuple[GpuProcess, ...] = ()):
    """A whole snapshot holding one training process, for the engine."""
    return Snapshot(
        time=t,
        host=host(),
        driver=DriverInfo(DRIVER_OK),
        gpus=gpus,
        processes=rows,
        host_processes=(HostProcess(pid=training.pid, ppid=1, rss_bytes=GIB, start_time=t - 3600),),
        training=(training,),
    )
