"""Rules on memory that changes step by step: a leak, and a cache emptied every step."""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.readers import Reader
from gputop.advisor.rules.base import (
    Finding,
    cuda_devices,
    device_gpu,
    device_increase,
    device_rise,
    device_series,
    pct,
    recent_window,
    unallocated_shares,
)
from gputop.advisor.samples import JobSample
from gputop.advisor.trends import counter_increase, steady_rise
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes, fmt_duration
from gputop.model import CRITICAL, INFO, SOURCE_EXTERNAL, SOURCE_PROBE, WARNING, Severity


def _after_warmup(sample: JobSample) -> bool:
    """Past the job's start-up: with the probe, training for ``WARMUP_STEPS`` steps; without, old enough."""
    if sample.view.probe.ok:
        return sample.loader is not None and sample.loader.batches >= th.WARMUP_STEPS
    return sample.age_s is not None and sample.age_s >= th.HOST_WARMUP_S


AFTER_WARMUP = Reader("after warm-up", _after_warmup)
RSS = Reader("rss_bytes", lambda s: None if s.rss_bytes is None else float(s.rss_bytes))
BATCHES = Reader("batches", lambda s: None if s.loader is None else float(s.loader.batches))
"""The batches the loop has asked the DataLoader it iterates for."""


def memory_leak(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """Memory at the start of each step rises steadily after warm-up: something keeps every step's tensors.

    On the GPU the probe's allocated bytes at step starts are exact; without them, the training process's RSS
    serves, with a larger least rise because host allocators are noisier.
    """
    recent = recent_window(w, config)
    if recent is None:
        return None
    warm = recent.where(AFTER_WARMUP)
    if not warm.covers(config.window_s):
        return None
    latest = warm.latest
    series: list[tuple[str, list[tuple[float, float]], float, int | None]] = []
    # A series that does not rise by the least rise from its first value to its last is no leak: its points are
    # not even gathered.
    for device in cuda_devices(latest):
        gpu = device_gpu(latest, device)
        room = gpu.memory_free_bytes if gpu is not None else None
        rise = device_rise(warm, device.device, "allocated_bytes")
        rising = rise is not None and rise > 0 and rise >= th.LEAK_MIN_RISE_CUDA_BYTES
        points = device_series(warm, device.device, "allocated_bytes") if rising else []
        series.append((f"cuda:{device.device} allocated at step start", points, th.LEAK_MIN_RISE_CUDA_BYTES, room))
    if not series:
        rise = warm.rise(RSS)
        rising = rise is not None and rise > 0 and rise >= th.LEAK_MIN_RISE_HOST_BYTES
        points = warm.points(RSS) if rising else []
        room = latest.host.memory_available_bytes
        series.append(("the training process's RSS", points, th.LEAK_MIN_RISE_HOST_BYTES, room))
    for what, points, least, room in series:
        growth = steady_rise(points, least)
        if growth is None:
            continue
        rise, slope, r2 = growth.rise, growth.slope, growth.r2
        full_s = None if room is None else room / slope
        if full_s is not None and full_s > th.FULL_WITHIN_S[INFO]:
            continue
        severity: Severity = INFO
        for level in (CRITICAL, WARNING):
            if full_s is not None and full_s <= th.FULL_WITHIN_S[level]:
                severity = level
                break
        on_gpu = what.startswith("cuda")
        return Finding(
            severity=severity,
            title=f"Memory leak: {what} grows {fmt_bytes(slope * 60)}/min",
            detail=f"{what} rose {fmt_bytes(rise)} in {warm.span_s:.0f} s, steadily (r² {r2:.2f})"
            + ("" if full_s is None else f"; the free memory is gone in {fmt_duration(full_s)} at this rate"),
            action=(
                "Something keeps every step's tensors, and with them their autograd graphs: typically "
                "losses.append(loss) or total += loss. Keep loss.item() (or loss.detach()) instead, and look for "
                "lists and dicts that grow each step."
            ),
            source=SOURCE_PROBE if on_gpu else SOURCE_EXTERNAL,
            evidence={
                "measure": what,
                "rise_bytes": int(rise),
                "span_s": round(warm.span_s, 1),
                "rate_bytes_per_s": int(slope),
                "r2": round(r2, 3),
                "full_in_s": None if full_s is None else int(full_s),
            },
        )
    return None


def empty_cache_in_loop(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The caching allocator gives memory back to the driver every step: ``torch.cuda.empty_cache()`` in the loop."""
    recent = recent_window(w, config)
    if recent is None:
        return None
    devices = cuda_devices(recent.latest)
    if not devices:
        return None
    steps = counter_increase(recent.values(BATCHES))
    if steps < th.WARMUP_STEPS / 2:
        return None
    for device in devices:
        frees = device_increase(recent, device.device, "num_device_free")
        cached = unallocated_shares(recent, device.device)
        if not cached or frees < steps:
            continue
        share = sorted(cached)[len(cached) // 2]
        if share > th.CACHE_EMPTIED_SHARE:
            continue
        return Finding(
            severity=WARNING,
            title="The CUDA cache is emptied every step",
            detail=f"cuda:{device.device}: {frees:.0f} frees to the driver in {steps:.0f} steps, and reserved "
            f"memory falls back to allocated ({pct(share)} cached) at step starts",
            action=(
                "Remove torch.cuda.empty_cache() from the training loop: it synchronises the GPU and hands the "
                "cache back to the driver, so the next step pays cudaMalloc again. It frees nothing the job can use."
            ),
            source=SOURCE_PROBE,
            evidence={
                "device": device.device,
                "device_frees": int(frees),
                "steps": int(steps),
                "cached_share": round(share, 3),
            },
        )
    return None
