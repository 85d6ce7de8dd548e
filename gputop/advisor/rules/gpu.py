"""Rules on the GPU and the loop that feeds it: a CPU-bound or launch-bound loop, idle tensor cores, a stalled job,
throttling, an unhealthy GPU."""

from __future__ import annotations

from collections.abc import Callable, Collection

from gputop.advisor import thresholds as th
from gputop.advisor.loop import main_thread_busy
from gputop.advisor.readers import DATA_WAIT_SHARE, GPU_BUSY, SM_ACTIVITY, SM_OCCUPANCY, TENSOR_ACTIVITY, Reader
from gputop.advisor.rules.base import Finding, pct, recent_window
from gputop.advisor.samples import JobSample, mean
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes
from gputop.model import (
    CRITICAL,
    HEALTH_CRITICAL,
    HEALTH_OK,
    INFO,
    SOURCE_BOTH,
    SOURCE_EXTERNAL,
    WARNING,
    Gpu,
    Severity,
    ThrottleReason,
)
from gputop.xids import describe

FP32_ACTIVITY = Reader("fp32_activity_percent", lambda s: mean([g.fp32_activity_percent for g in s.gpus]))


def cpu_bound_loop(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The GPU waits on a main thread that is on the CPU all the time, and not for data."""
    recent = recent_window(w, config)
    if recent is None or not recent.latest.on_gpu:
        return None
    busy = recent.median(GPU_BUSY)
    if busy is None or busy >= th.CPU_LOOP_GPU_BUSY_BELOW:
        return None
    main = main_thread_busy(recent)
    if main is None or main < th.MAIN_THREAD_BUSY:
        return None
    wait = recent.median(DATA_WAIT_SHARE)
    if wait is not None and wait >= th.DATA_WAIT_INFO:
        return None
    # A busy main thread and an idle GPU is also a job setting up (building a dataset index, say): only a loop
    # that is training counts, seen by the probe's steps, or without it by a GPU that runs something.
    training = recent.latest.loader is not None if recent.latest.view.probe.ok else busy >= th.GPU_ACTIVE_FROM_PERCENT
    if not training:
        return None
    return Finding(
        severity=WARNING,
        title="The training loop is CPU-bound: Python overhead starves the GPU",
        detail=f"the main thread is on the CPU {pct(main)} of the time; GPU busy {busy:.0f}%"
        + ("" if wait is None else f"; the loop waits for data {pct(wait)} of each step"),
        action=(
            "Give the GPU more per launch and the CPU less per step: a larger batch, torch.compile (fuses kernels), "
            "CUDA graphs for a static step, and fewer .item() / .cpu() calls, each of which waits for the GPU."
        ),
        source=SOURCE_EXTERNAL if wait is None else SOURCE_BOTH,
        evidence={"main_thread_busy_share": main, "gpu_busy_percent": busy, "data_wait_share": wait},
    )


def launch_bound(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The GPU always has a kernel running, but its SMs are mostly idle, while the main thread is on the CPU all
    the time and not waiting for data: small kernels launched one after another, paced by Python."""
    recent = recent_window(w, config)
    if recent is None or not recent.latest.on_gpu:
        return None
    busy = recent.median(GPU_BUSY)
    if busy is None or busy < th.LAUNCH_BOUND_GPU_BUSY:
        return None
    sm = recent.median(SM_ACTIVITY)
    if sm is None or sm > th.LAUNCH_BOUND_SM_ACTIVITY:
        return None
    main = main_thread_busy(recent)
    if main is None or main < th.MAIN_THREAD_BUSY:
        return None
    wait = recent.median(DATA_WAIT_SHARE)
    if wait is not None and wait >= th.DATA_WAIT_INFO:
        return None
    occupancy = recent.median(SM_OCCUPANCY)
    return Finding(
        severity=WARNING,
        title="Launch-bound: the GPU runs small kernels one at a time",
        detail=f"GPU busy {busy:.0f}% but SM activity {sm:.0f}%"
        + ("" if occupancy is None else f" (occupancy {occupancy:.0f}%)")
        + f"; the main thread is on the CPU {pct(main)} of the time"
        + ("" if wait is None else f" and waits for data {pct(wait)} of each step"),
        action=(
            "Give each launch more work and the CPU less per step: a larger batch, torch.compile (fuses kernels), "
            "CUDA graphs (torch.compile(mode='reduce-overhead')) for a static step, and fewer host syncs in the "
            "loop (.item(), .cpu(), printing a loss every step), each of which waits for the GPU."
        ),
        source=SOURCE_EXTERNAL if wait is None else SOURCE_BOTH,
        evidence={
            "gpu_busy_percent": busy,
            "sm_activity_percent": sm,
            "sm_occupancy_percent": occupancy,
            "main_thread_busy_share": main,
            "data_wait_share": wait,
        },
    )


def tensor_cores_idle(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The SMs work but the tensor cores do not, and the probe sees float32 parameters, no autocast and float32
    matmuls kept off the tensor cores: the step runs its matmuls on the FP32 pipes."""
    recent = recent_window(w, config)
    if recent is None or not recent.latest.on_gpu:
        return None
    # What the probe saw first: it is one look, where the medians read the window.
    probe = recent.latest.view.probe
    if not probe.ok or probe.autocast is not False or probe.float32_matmul_precision != th.FULL_PRECISION:
        return None
    if probe.parameter_dtypes != ("float32",):
        return None
    sm = recent.median(SM_ACTIVITY)
    if sm is None or sm < th.TENSOR_IDLE_SM_ACTIVITY:
        return None
    tensor = recent.median(TENSOR_ACTIVITY)
    if tensor is None or tensor > th.TENSOR_IDLE_PERCENT:
        return None
    fp32 = recent.median(FP32_ACTIVITY)
    return Finding(
        severity=INFO,
        title="Tensor cores idle: the matmuls run in full float32",
        detail=f"SM activity {sm:.0f}% but tensor-core activity {tensor:.0f}%"
        + ("" if fp32 is None else f", FP32 pipes {fp32:.0f}%")
        + "; parameters float32, no autocast seen, float32 matmul precision 'highest'",
        action=(
            'Run the forward under torch.autocast("cuda", dtype=torch.bfloat16) (bf16 needs no GradScaler), or at '
            'least allow TF32: torch.set_float32_matmul_precision("high"). Either moves the matmuls onto the tensor '
            "cores, several times faster on Ampere and newer."
        ),
        source=SOURCE_BOTH,
        evidence={
            "sm_activity_percent": sm,
            "tensor_activity_percent": tensor,
            "fp32_activity_percent": fp32,
            "autocast": probe.autocast,
            "float32_matmul_precision": probe.float32_matmul_precision,
            "parameter_dtypes": probe.parameter_dtypes,
        },
    )


def _stall_cause(sample: JobSample, idle_s: float) -> str:
    loader = sample.loader
    if loader is not None and loader.waiting_now_s is not None and loader.waiting_now_s >= idle_s / 2:
        return (
            f"the loop has waited {loader.waiting_now_s:.0f} s for its next batch: a hung worker, or storage or "
            "a network that stopped answering"
        )
    main = sample.view.main_thread
    where = main.wait_channel or ""
    if "futex" in where:
        return (
            "the main thread sleeps on a lock (futex): a deadlock, or a collective (all-reduce) waiting for "
            "another rank"
        )
    if any(word in where for word in ("poll", "select", "sock", "tcp", "pipe")):
        return f"the main thread waits in {where}: on the network or another process"
    if main.activity == "running":
        return "the main thread is busy on the CPU: a long CPU phase (evaluation, checkpointing, preprocessing)"
    return f"the main thread is {main.status or 'in an unknown state'}" + (f" in {where}" if where else "")


def gpu_idle(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """A process holds GPU memory but the GPU has run nothing for a long time: the job looks stalled."""
    latest = w.latest
    held = latest.gpu_memory_bytes
    busy = latest.gpu_busy_percent
    if not held or busy is None or busy > 0:
        return None
    active = [s.time for s in w.samples if (s.gpu_busy_percent or 0) > 0]
    idle_s = latest.time - (active[-1] if active else w.samples[0].time)
    cause = _stall_cause(latest, config.gpu_idle_s)
    loader = latest.loader
    return Finding(
        severity=WARNING,
        title=f"GPU idle for {idle_s:.0f} s while the job holds {fmt_bytes(held)}: stalled?",
        detail=cause,
        action=(
            f"See where it waits: py-spy dump --pid {latest.pid} (and its workers). A collective that never "
            "completes points to a rank that died or took another path; a timeout in init_process_group turns the "
            "hang into an error. If it is evaluating or saving a checkpoint, this clears when it resumes."
        ),
        source=SOURCE_BOTH if loader is not None else SOURCE_EXTERNAL,
        evidence={
            "idle_s": round(idle_s, 1),
            "gpu_memory_bytes": held,
            "main_thread_status": latest.view.main_thread.status,
            "wait_channel": latest.view.main_thread.wait_channel,
            "waiting_for_batch_s": None if loader is None else loader.waiting_now_s,
            "last_batch_age_s": None if loader is None else loader.last_batch_age_s,
        },
    )


def _gives(reasons: Collection[ThrottleReason]) -> Callable[[JobSample], bool | None]:
    """Whether a GPU of a sample gives any of ``reasons``; None where none reports its reasons."""

    wanted = frozenset(reasons)

    def test(sample: JobSample) -> bool | None:
        known = [g.throttle_reasons for g in sample.gpus if g.throttle_reasons is not None]
        if not known:
            return None
        return not all(map(wanted.isdisjoint, known))

    return test


def _power_capped(sample: JobSample) -> bool | None:
    """Whether a GPU of the sample is at its power cap and clocks well below its maximum."""
    known = [(g, g.throttle_reasons) for g in sample.gpus if g.throttle_reasons is not None]
    if not known:
        return None
    return any(
        th.POWER_CAP in reasons
        and g.clock_sm_mhz is not None
        and g.clock_sm_max_mhz
        and g.clock_sm_mhz < th.POWER_CAP_CLOCK_SHARE * g.clock_sm_max_mhz
        for g, reasons in known
    )


ANY_THROTTLE = Reader("throttled", _gives(frozenset((*th.HARDWARE_SLOWDOWN, *th.THERMAL_SLOWDOWN, th.POWER_CAP))))
"""Whether a GPU of the sample gives any reason ``throttling`` looks for."""
_LEVELS: tuple[tuple[Severity, Reader[bool | None], str], ...] = (
    (
        CRITICAL,
        Reader("hardware slowdown", _gives(th.HARDWARE_SLOWDOWN)),
        "its hardware slowdown protects it from heat or a power fault",
    ),
    (WARNING, Reader("thermal slowdown", _gives(th.THERMAL_SLOWDOWN)), "it is too hot: the driver lowers its clocks"),
    (INFO, Reader("power capped", _power_capped), "it is at its power limit and clocks well below its maximum"),
)
"""``throttling``'s levels, the most severe first: each with the test of a sample and the words for it."""


def throttling(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The GPU's clocks are held down by its thermal or power protection."""
    recent = recent_window(w, config)
    if recent is None or not recent.latest.on_gpu:
        return None
    # Each level's samples are among those with any of the reasons: too few of those, and no level is reached.
    throttled = recent.share(ANY_THROTTLE)
    if throttled is None or throttled < th.THROTTLE_SHARE:
        return None
    for severity, test, why in _LEVELS:
        share = recent.share(test)
        if share is None or share < th.THROTTLE_SHARE:
            continue
        gpu = recent.latest.gpus[0]
        detail = (
            f"GPU {gpu.index}: {', '.join(gpu.throttle_reasons or ()) or 'reasons varied'} in {pct(share)} of the "
            f"samples; SM clock {gpu.clock_sm_mhz} of {gpu.clock_sm_max_mhz} MHz, {gpu.temperature_c} °C, "
            f"{gpu.power_w} of {gpu.power_limit_w} W"
        )
        return Finding(
            severity=severity,
            title=f"GPU {gpu.index} is throttled: {why}",
            detail=detail,
            action=(
                "The hardware slows the GPU; nothing in the job's code does. Check cooling (fans, airflow, inlet "
                "temperature) and power delivery; `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER` shows which "
                "limit acts. A power limit set below the default can be raised with nvidia-smi -pl."
            ),
            source=SOURCE_EXTERNAL,
            evidence={
                "gpu_index": gpu.index,
                "reasons": tuple(gpu.throttle_reasons or ()),
                "share": round(share, 2),
                "clock_sm_mhz": gpu.clock_sm_mhz,
                "clock_sm_max_mhz": gpu.clock_sm_max_mhz,
                "temperature_c": gpu.temperature_c,
                "power_w": gpu.power_w,
                "power_limit_w": gpu.power_limit_w,
            },
        )
    return None


def _sentence(words: str) -> str:
    """``words`` as a sentence of its own: a capital first letter (the rest as written: GPU stays GPU), a stop."""
    return words[:1].upper() + words[1:] + ". "


def gpu_unhealthy(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """A GPU the process holds is warn or critical by its health (``gputop.health``): its Xids, ECC, remapped rows,
    retired pages or PCIe replays."""
    for gpu in w.latest.gpus:
        finding = unhealthy(gpu)
        if finding is not None:
            return finding
    return None


def unhealthy(gpu: Gpu) -> Finding | None:
    """``gpu`` is warn or critical by its health, whether or not a process is on it (a GPU that failed while idle
    fails the next job put on it). The finding names the worst cause; an Xid, with what it means and what to do."""
    health = gpu.health
    if health is None or health.state == HEALTH_OK:
        return None
    last = health.last_xid
    what = f"Xid {last.xid}, {describe(last.xid).meaning}" if last else (health.causes or ("",))[0]
    critical = health.state == HEALTH_CRITICAL
    return Finding(
        severity=CRITICAL if critical else WARNING,
        title=f"GPU {gpu.index} is {'failing' if critical else 'unwell'}: {what}",
        detail="; ".join(health.causes),
        action=(
            (_sentence(describe(last.xid).action) if last else "")
            + "`gputop doctor` lists every health reading of the GPU; the kernel log (dmesg | grep -i xid) has "
            "the driver's own words. A job on a GPU that needs a reset loses its work at the reset: checkpoint."
        ),
        source=SOURCE_EXTERNAL,
        evidence={
            "gpu_index": gpu.index,
            "health": health.state,
            "xids": tuple(x.xid for x in health.xids),
            "causes": health.causes,
        },
    )
