"""Rules on how the step's time behaves over the job's life, from the probe's step anatomy: a slow warm-up, steps
that vary a lot, and steps that grow slower as the job runs. Each is its own rule (``slow-warmup``,
``step-variance``, ``step-drift``): they have different causes and remedies, and one can hold while another clears.
"""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.readers import STEP_MEAN_S, STEP_S, Reader
from gputop.advisor.rules.base import Finding, pct, timed_window
from gputop.advisor.rules.gpu import ANY_THROTTLE
from gputop.advisor.rules.leaks import RSS
from gputop.advisor.rules.phases import DATA_SHARE
from gputop.advisor.rules.pipeline import steady_wait
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes
from gputop.model import INFO, SOURCE_BOTH, SOURCE_PROBE, WARNING

STEP_P95_S = Reader("step_p95_s", lambda s: s.step.step_p95_s if s.step is not None else None)
STEP_DRIFT = Reader("step drift", lambda s: s.step.drift if s.step is not None else None)
TRAINED_S = Reader(
    "step trained_s",
    lambda s: s.step.steps / s.step.steps_per_s if s.step is not None and s.step.steps_per_s else None,
)


def waits_for_data(recent: JobWindow) -> bool:
    """Whether the loop waits for data a share of each step that ``data-starved`` speaks of, by either witness: the
    step anatomy's data phase, or the loader's own wait (less its workers' start-up). They can disagree early in a
    job: on a starved CI run the anatomy's window still read 9 % while the loader's read 94 %."""
    phase = recent.median(DATA_SHARE)
    loader = steady_wait(recent)
    return any(share is not None and share >= th.DATA_WAIT_INFO for share in (phase, loader))


def _ms(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"


def slow_warmup(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The job's first steps took many times the steady step: compilation or autotuning."""
    recent = timed_window(w, config)
    step = None if recent is None else recent.latest.step
    if recent is None or step is None or step.warmup_step_s is None:
        return None
    steady = recent.median(STEP_S)
    warmup = step.warmup_step_s
    if not steady or warmup < th.SLOW_WARMUP_RATIO * steady or warmup - steady < th.SLOW_WARMUP_MIN_S:
        return None
    return Finding(
        severity=INFO,
        title=f"Slow warm-up: the first steps took {warmup / steady:.0f}× the steady step",
        detail=f"the first steps took {_ms(warmup)} each (median), the steps since {_ms(steady)}",
        action=(
            "That is compilation or autotuning, paid once: torch.compile compiles the model on its first steps (and "
            "again for each new input shape or graph break), torch.backends.cudnn.benchmark=True tries the "
            "convolution algorithms for each new shape. Expected once; if it repeats, keep input shapes fixed (pad "
            "to a few sizes, drop_last=True), and keep torch.compile's cache between runs (TORCHINDUCTOR_CACHE_DIR "
            "on a persistent disk)."
        ),
        source=SOURCE_PROBE,
        evidence={
            "warmup_step_s": round(warmup, 4),
            "step_s": round(steady, 4),
            "ratio": round(warmup / steady, 1),
        },
    )


def step_variance(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """One step in twenty takes much longer than the median step, in a loop that hardly waits for data: one that
    does has uneven steps by nature (a batch ready or not), which ``data-starved`` names."""
    recent = timed_window(w, config)
    if recent is None:
        return None
    median = recent.median(STEP_S)
    p95 = recent.median(STEP_P95_S)
    if not median or p95 is None or p95 < th.STEP_VARIANCE_RATIO * median:
        return None
    if waits_for_data(recent):
        return None
    data = recent.median(DATA_SHARE)
    mean = recent.median(STEP_MEAN_S)
    lost = None if not mean or mean <= median else 1 - median / mean
    seen = (
        f"the loop waits for data {pct(data)} of each step on average: batches that come late now and then"
        if data is not None and data >= th.DATA_WAIT_NONE
        else None
    )
    return Finding(
        severity=WARNING if p95 >= th.STEP_VARIANCE_WARNING * median else INFO,
        title=f"Uneven steps: one in 20 takes {p95 / median:.1f}× the median step",
        detail=f"median step {_ms(median)}, 95th percentile {_ms(p95)}"
        + ("" if lost is None else f"; the steps slower than the median cost {pct(lost)} of the time")
        + ("" if seen is None else f"; {seen}"),
        action=(
            "Find what the slow steps do that the others do not: batches that come late (more workers, a larger "
            "prefetch_factor), inputs of varying shapes that make torch.compile or cudnn.benchmark work again "
            "(pad to a few fixed sizes), Python's garbage collector (gc.freeze() after start-up), or periodic work "
            "in the loop (logging, evaluation, checkpoints: expected, if it is)."
        ),
        source=SOURCE_PROBE,
        evidence={
            "step_s": round(median, 4),
            "step_p95_s": round(p95, 4),
            "ratio": round(p95 / median, 2),
            "mean_step_s": None if mean is None else round(mean, 4),
            "slow_steps_share": None if lost is None else round(lost, 3),
            "data_wait_share": None if data is None else round(data, 3),
        },
    )


def step_drift(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The steps have grown slower since the job's first steady window, in a job that has trained for minutes
    and hardly waits for data: the steps of one that does are set by its loader, which ``data-starved`` names."""
    recent = timed_window(w, config)
    if recent is None:
        return None
    drift = recent.median(STEP_DRIFT)
    if drift is None or drift < th.STEP_DRIFT:
        return None
    trained = recent.median(TRAINED_S)
    if trained is None or trained < th.STEP_DRIFT_MIN_RUN_S:
        return None
    if waits_for_data(recent):
        return None
    step_s = recent.median(STEP_S)
    throttled = recent.share(ANY_THROTTLE)
    rss = recent.rise(RSS)
    seen = []
    if throttled is not None and throttled >= th.THROTTLE_SHARE:
        seen.append(f"its GPU is throttled in {pct(throttled)} of the samples (throttling)")
    if rss is not None and rss >= th.LEAK_MIN_RISE_HOST_BYTES:
        seen.append(f"its memory grew {fmt_bytes(rss)} over the window")
    return Finding(
        severity=WARNING if drift >= th.STEP_DRIFT_WARNING else INFO,
        title=f"Steps slow down: {pct(drift - 1)} slower than at the start",
        detail=(f"the median step is {_ms(step_s)}, " if step_s else "the median step is ")
        + f"{drift:.2f}× the first steady window's"
        + ("; " + "; ".join(seen) if seen else "; neither throttling nor growing memory is seen in this window"),
        action=(
            "A job that slows as it runs is held back by something that grows or heats: a GPU that throttles "
            "(cooling, power), memory that leaks (tensors kept in lists, a loss kept with its graph), a dataset "
            "cache that grows in each worker, or a log or metric list the loop walks at each step. Compare with "
            "the start of the job: nvidia-smi's clocks, the process's memory, the step's phases."
        ),
        source=SOURCE_BOTH if seen else SOURCE_PROBE,
        evidence={
            "drift": round(drift, 3),
            "step_s": None if step_s is None else round(step_s, 4),
            "throttled_share": throttled,
            "rss_rise_bytes": None if rss is None else int(rss),
        },
    )
