"""What a training job's steps cost, added to its view where the probe reports step times: energy per step and
per sample from NVML's energy counter over the GPUs the process uses, and achieved TFLOP/s and MFU from the
probe's FLOPs per step against the GPU model's peak (``gputop.gpu_peaks``).

Energy per step is a rate, not a reading: the counter moves in steps of 13 to 18 J every 50 to 70 ms on an H100
(docs/benchmarks.md, "Measured on a real GPU"), so one step's energy cannot be read. The GPUs' mean power over
the last ``ENERGY_SPAN_S`` to ``ENERGY_KEEP_S`` seconds is divided by the probe's steps (and samples) per second.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Sequence

from gputop.gpu_peaks import GpuPeak, Precision, peak_of
from gputop.model import (
    INVALID,
    MEASURING,
    MIG_ENABLED,
    Gpu,
    GpuProcess,
    ProbeReport,
    StepAnatomy,
    StepCost,
    frozen_reasons,
)
from gputop.plausible import bounded

ENERGY_SPAN_S = 5.0
"""The shortest span the energy counter is read over: 70 to 100 of its steps, so that one step more or less at
either end moves the mean power by under 2 %."""
ENERGY_KEEP_S = 30.0
"""The longest: readings older than this are dropped, so the power follows a job that changes pace."""
TENSOR_CORE_MATMUL = frozenset({"high", "medium"})
"""``torch.get_float32_matmul_precision()`` values that let float32 matmuls run as TF32 on tensor cores."""


class EnergyHistory:
    """Each GPU's energy counter at the ticks it was read (the slow cadence), over the last ``ENERGY_KEEP_S``."""

    def __init__(self, keep_s: float = ENERGY_KEEP_S, span_s: float = ENERGY_SPAN_S) -> None:
        self.keep_s = keep_s
        self.span_s = span_s
        self._readings: deque[tuple[float, dict[str, float]]] = deque()

    def add(self, now: float, gpus: Sequence[Gpu]) -> None:
        """Keep the counters of ``gpus`` as read at ``now`` (Unix time)."""
        if self._readings and now <= self._readings[-1][0]:
            self._readings.clear()  # the clock went back: spans measured across it would be wrong
        self._readings.append((now, {gpu_key(g): g.energy_j for g in gpus if g.energy_j is not None}))
        while self._readings and now - self._readings[0][0] > self.keep_s:
            self._readings.popleft()

    def power_w(self, keys: Collection[str]) -> tuple[float | None, str | None]:
        """The GPUs' (``keys``) summed mean power from the oldest reading of them all to the newest, or why not."""
        if not self._readings:
            return None, MEASURING
        last_time, last = self._readings[-1]
        for time, energy in self._readings:
            if last_time - time < self.span_s:
                break
            if all(key in energy and key in last for key in keys):
                spent = sum(last[key] - energy[key] for key in keys)
                if spent < 0:
                    return None, "the energy counter went back (the driver was reloaded)"
                return spent / (last_time - time), None
        return None, MEASURING


def gpu_key(gpu: Gpu) -> str:
    """What a GPU's counter is kept by: its UUID (an index may name another GPU after one is lost)."""
    return gpu.uuid or f"#{gpu.index}"


def gpus_used(pid: int, probe: ProbeReport, gpus: Sequence[Gpu], processes: Sequence[GpuProcess]) -> list[Gpu]:
    """The GPUs ``pid`` uses: where NVML lists it, and the devices its probe joined to an NVML index."""
    indices = {p.gpu_index for p in processes if p.pid == pid}
    indices.update(d.gpu_index for d in probe.cuda if d.gpu_index is not None)
    return [g for g in gpus if g.index in indices]


def step_cost(
    pid: int,
    own_pids: Collection[int],
    probe: ProbeReport,
    gpus: Sequence[Gpu],
    processes: Sequence[GpuProcess],
    energy: EnergyHistory,
) -> StepCost | None:
    """The cost of ``pid``'s steps; None where its probe reports no step. ``own_pids`` are the processes of the
    same job (the process and its DataLoader workers), which may share its GPUs without making the counter
    another job's too."""
    step = probe.step
    if step is None:
        return None
    used = gpus_used(pid, probe, gpus, processes)
    reasons: dict[str, str] = {}
    power, why = _power(used, own_pids, processes, energy)
    per_step = _per(power, step.steps_per_s, why, "the probe has timed no steps per second")
    per_sample = _per(power, step.samples_per_s, why, "the probe knows no samples per second (no batch size)")
    achieved, why_achieved = _achieved(step)
    precision, peak, source, why_peak = _peak(probe, used)
    mfu = None if achieved is None or peak is None else achieved / peak
    for name, value, reason in (
        ("power_w", power, why),
        ("energy_per_step_j", per_step[0], per_step[1]),
        ("energy_per_sample_j", per_sample[0], per_sample[1]),
        ("achieved_tflops", achieved, why_achieved),
        ("peak_tflops", peak, why_peak),
        ("mfu", mfu, why_achieved or why_peak),
    ):
        if value is None and reason is not None:
            reasons[name] = reason
    cost = StepCost(
        energy_per_step_j=_round(per_step[0], 4),
        energy_per_sample_j=_round(per_sample[0], 6),
        power_w=_round(power, 1),
        achieved_tflops=_round(achieved, 3),
        peak_tflops=peak,
        peak_source=source,
        precision=precision,
        mfu=_round(mfu, 4),
        unavailable=frozen_reasons(reasons),
    )
    return bounded(cost, INVALID)


def _power(
    used: Sequence[Gpu], own_pids: Collection[int], processes: Sequence[GpuProcess], energy: EnergyHistory
) -> tuple[float | None, str | None]:
    """The mean power of the GPUs ``used``, or why it is not this job's alone."""
    if not used:
        return None, "the process uses no GPU NVML lists"
    for gpu in used:
        if gpu.energy_j is None:
            return None, f"GPU {gpu.index}: {gpu.unavailable.get('energy_j', 'no energy counter')}"
        if gpu.mig_mode == MIG_ENABLED:
            return None, f"GPU {gpu.index} is split into MIG instances: its counter is the whole GPU's"
        others = sorted({p.pid for p in processes if p.gpu_index == gpu.index and p.pid not in own_pids})
        if others:
            return None, f"GPU {gpu.index} is shared with PID {others[0]}: its counter is not this job's alone"
    return energy.power_w([gpu_key(g) for g in used])


def _per(power: float | None, rate: float | None, why: str | None, no_rate: str) -> tuple[float | None, str | None]:
    """Energy per unit of ``rate`` (steps or samples per second) at ``power``."""
    if power is None:
        return None, why
    if not rate:
        return None, no_rate
    return power / rate, None


def _achieved(step: StepAnatomy) -> tuple[float | None, str | None]:
    if step.flops_per_step is None:
        return None, step.unavailable.get("flops_per_step", "the probe has not counted FLOPs per step")
    if step.steps_per_s is None:
        return None, "the probe has timed no steps per second"
    return step.flops_per_step * step.steps_per_s / 1e12, None


def precision_of(probe: ProbeReport) -> tuple[Precision | None, str | None]:
    """The precision the job's matrix math runs in, from how the probe saw it: autocast gives 16-bit math (bf16
    or fp16, which have the same peak on every GPU with both), 16-bit parameters their own, float32 parameters
    TF32 where ``float32_matmul_precision`` allows tensor cores and FP32 where it is ``highest``."""
    dtypes = probe.parameter_dtypes or ()
    if probe.autocast or "bfloat16" in dtypes:
        return "bf16", None
    if "float16" in dtypes:
        return "fp16", None
    if "float32" in dtypes:
        matmul = probe.float32_matmul_precision
        if matmul is None:
            return None, "the probe did not report torch's float32 matmul precision"
        return ("tf32" if matmul in TENSOR_CORE_MATMUL else "fp32"), None
    return None, "the probe has not seen the parameters' dtypes (no optimizer step yet)"


def _peak(probe: ProbeReport, used: Sequence[Gpu]) -> tuple[Precision | None, float | None, str | None, str | None]:
    """The precision in use, the peak of the GPUs ``used`` at it (summed), its source, or why there is none."""
    precision, why = precision_of(probe)
    if not used:
        return precision, None, None, "the process uses no GPU NVML lists"
    if probe.step is not None and probe.step.clock == "host" and not probe.cuda and probe.cuda_reason:
        # No CUDA events and no CUDA memory: its FLOPs are the CPU's, which against a GPU's peak would read as a
        # GPU left idle.
        return precision, None, None, f"its math runs on the CPU ({probe.cuda_reason})"
    peaks: list[GpuPeak] = []
    for gpu in used:
        peak = peak_of(gpu.name)
        if peak is None:
            return precision, None, None, f"no peak known for {gpu.name or f'GPU {gpu.index}'}"
        peaks.append(peak)
    if precision is None:
        return None, None, None, why
    if precision == "bf16" and probe.autocast and any(p.bf16 is None for p in peaks):
        precision = "fp16"  # autocast on a GPU without bfloat16 tensor cores runs float16, its default
    total = 0.0
    for peak in peaks:
        value = peak.tflops(precision)
        if value is None:
            return precision, None, None, f"the {peak.model} has no {precision} figure: no tensor cores for it"
        total += value
    return precision, total, peaks[0].source, None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)
