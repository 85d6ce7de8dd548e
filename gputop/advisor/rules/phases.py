"""Rules on where a step's time goes, from the probe's step anatomy: host syncs hidden in the loop, copies to the
GPU that block it, and a low model FLOPs utilisation with the cause gputop can see.

Each needs the probe's step anatomy (``StepAnatomy``, ``gputop run`` or ``gputop.probe.install()``) and stays silent
without it; ``low-mfu`` also needs the monitor's ``StepCost``.
"""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.loop import main_thread_busy
from gputop.advisor.readers import (
    GPU_BUSY,
    GPU_MEMORY_FRACTION,
    PHASE_S,
    PHASE_SHARE,
    SM_ACTIVITY,
    STEP_S,
    TENSOR_ACTIVITY,
    Reader,
)
from gputop.advisor.rules.base import Finding, loader_line, pct, recent_window, timed_window
from gputop.advisor.samples import JobSample
from gputop.advisor.window import AdvisorConfig, JobWindow
from gputop.formatting import fmt_bytes
from gputop.frozen import immutable
from gputop.model import INFO, PIN_ON, SOURCE_BOTH, SOURCE_PROBE, WARNING, StepAnatomy, SyncSite

SYNCS_PER_STEP = Reader("syncs_per_step", lambda s: s.step.syncs_per_step if s.step is not None else None)
MFU = Reader("mfu", lambda s: s.view.cost.mfu if s.view.cost is not None else None)
DATA_SHARE = PHASE_SHARE("data")
H2D_SHARE = PHASE_SHARE("h2d")
OTHER_SHARE = PHASE_SHARE("other")
H2D_S = PHASE_S("h2d")

VALUE_READS = frozenset(("item", "cpu", "tolist", "numpy", "print", "repr", "str", "format", "float", "int"))
"""Calls that read a tensor's value on the host: read it every N steps instead."""
DATA_DEPENDENT = frozenset(("nonzero", "masked_select", "unique", "index", "repeat_interleave"))
"""Calls whose output size depends on the data, which the host must know before it can go on."""
BRANCHES = frozenset(("bool", "is_nonzero", "if", "__bool__"))
"""A Python ``if`` (or ``while``, ``assert``) on a tensor."""
FREE_PER_STEP = th.HIDDEN_SYNC_TARGET


def _call_words(site: SyncSite) -> str:
    """``.item() at train.py:57``."""
    call = site.call
    if call in BRANCHES:
        return f"a Python if on a tensor at {site.site}"
    if call == "synchronize":
        return f"torch.cuda.synchronize() at {site.site}"
    if call in ("print", "repr", "str", "format"):
        return f"printing a tensor at {site.site}"
    return f".{call}() at {site.site}"


def _remedy(site: SyncSite, every: int | None) -> str:
    """What to change at one sync site."""
    call = site.call
    if call in DATA_DEPENDENT:
        return (
            f"its output size depends on the data, so the host must wait for it: keep shapes fixed (a mask and "
            f"torch.where instead of .{call}()), or move it out of the step"
        )
    if call in BRANCHES:
        return "decide on the GPU instead (torch.where), or check the condition every few steps"
    if call == "synchronize":
        return "remove it from the loop: it is only needed to time the GPU's work"
    often = f"every {every} steps" if every is not None else "every N steps"
    return (
        f"read the value {often} instead of every step, and keep it on the GPU in between "
        "(running += loss.detach(); .item() once when logging)"
    )


@immutable
class SyncCost:
    """What a window says the job's syncs may cost: the share of the step the GPU idles outside the data wait.

    A loop that never waits for the GPU queues the next step's kernels while the GPU runs this step's, and the GPU
    never idles for the host; a sync every step stops that, and every gap in the host's work after it shows as the
    GPU idle. The GPU's idle time outside the data wait is then at most what the syncs cost: an upper bound, the
    time a loop without them could fill."""

    sites: tuple[SyncSite, ...]
    syncs_per_step: float
    share: float
    gpu_busy_percent: float
    data_share: float


def sync_cost(recent: JobWindow) -> SyncCost | None:
    """The syncs reached every step and what they may cost, or None without them or without the GPU's busy time."""
    step = recent.latest.step
    if step is None:
        return None
    sites = tuple(s for s in step.sync_sites if s.per_step >= th.HIDDEN_SYNC_PER_STEP)
    if not sites:
        return None
    busy = recent.median(GPU_BUSY)
    if busy is None:
        return None
    data = recent.median(DATA_SHARE) or 0.0
    syncs = recent.median(SYNCS_PER_STEP) or sum(s.per_step for s in step.sync_sites)
    share = max(0.0, 1.0 - busy / 100 - data)
    return SyncCost(tuple(sorted(sites, key=lambda s: -s.per_step)), syncs, share, busy, data)


def _log_every(share: float) -> int | None:
    """The round step count at which reading a value costs at most ``HIDDEN_SYNC_TARGET`` of the step."""
    return next((n for n in th.LOG_EVERY_STEPS if share / n <= FREE_PER_STEP), None)


def hidden_sync(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """A place in the job's code makes the host wait for the GPU every step while the GPU idles for it."""
    recent = timed_window(w, config)
    if recent is None:
        return None
    cost = sync_cost(recent)
    if cost is None or cost.share < th.HIDDEN_SYNC_SHARE:
        return None
    top = cost.sites[0]
    every = _log_every(cost.share)
    step_s = recent.median(STEP_S)
    where = _call_words(top)
    times = "every step" if top.per_step < 1.5 else f"{top.per_step:.0f} times a step"
    others = [f"{_call_words(s)} ({s.per_step:g} a step)" for s in cost.sites[1:]]
    ms = "" if not step_s else f" ({cost.share * step_s * 1000:.0f} ms of {step_s * 1000:.0f} ms)"
    suggest: dict[str, float | int | str | bool] = {}
    if every is not None and top.call in VALUE_READS:
        suggest["log_every_steps"] = every
    return Finding(
        severity=WARNING if cost.share >= th.HIDDEN_SYNC_WARNING else INFO,
        title=f"{where} makes the host wait for the GPU {times}: up to {pct(cost.share)} of the step",
        detail=f"{cost.syncs_per_step:g} host syncs a step"
        + (f"; also {', '.join(others)}" if others else "")
        + f"; the GPU idles {pct(cost.share)} of each step outside the data wait{ms} (busy "
        f"{cost.gpu_busy_percent:.0f}%, data wait {pct(cost.data_share)}): the syncs cost at most that",
        action=(
            f"At {top.site}: {_remedy(top, every)}. A loop that does not wait for the GPU queues the next step's "
            "work while the GPU runs this one, and the GPU no longer idles while the host catches up."
        ),
        source=SOURCE_BOTH,
        evidence={
            "site": top.site,
            "call": top.call,
            "per_step": top.per_step,
            "syncs_per_step": round(cost.syncs_per_step, 2),
            "sites": tuple(f"{s.site} {s.call}" for s in cost.sites),
            "estimated_share": round(cost.share, 3),
            "gpu_busy_percent": cost.gpu_busy_percent,
            "data_wait_share": round(cost.data_share, 3),
            "step_s": step_s,
        },
        suggest=suggest,
    )


def h2d_bound(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """Copies to the GPU from pageable memory, or made without ``non_blocking``, take a share of each step."""
    recent = timed_window(w, config)
    if recent is None or recent.latest.step is None:
        return None
    step = recent.latest.step
    share = recent.median(H2D_SHARE)
    if share is None or share < th.H2D_SHARE:
        return None
    if not _copies_to_change(step):
        return None
    pageable = step.h2d_pageable_share
    blocking = step.h2d_blocking_share
    from_pageable = pageable is not None and pageable >= th.H2D_PAGEABLE_SHARE
    blocks = blocking is not None and blocking >= th.H2D_PAGEABLE_SHARE
    seconds = recent.median(H2D_S)
    copied = step.h2d_bytes_per_step
    rate = f" at {fmt_bytes(copied / seconds)}/s" if copied and seconds else ""
    line = loader_line(recent.latest)
    changes = []
    suggest: dict[str, float | int | str | bool] = {}
    pinning = _pinning(recent.latest)
    if from_pageable and pinning == PINNED:
        changes.append(
            f"the DataLoader{line} already runs with pin_memory=True, so the pageable bytes are not the batch it "
            "pinned: a batch of a type of the job's own without a pin_memory() method, or tensors made or changed on "
            "the CPU after the loader (.float(), torch.cat, a transform in the loop); pin those (tensor.pin_memory(), "
            "or a pin_memory() method on the batch type), or move the work after the copy"
        )
    elif from_pageable and pinning == TURNED_OFF:
        changes.append(
            f"the DataLoader{line} asks for pin_memory=True, but torch runs it without: it found no accelerator "
            "when the iterator started, and pinning needs torch to see the GPU there"
        )
    elif from_pageable:
        changes.append(f"set pin_memory=True in the DataLoader{line}: pinned batches are copied by DMA at full speed")
        suggest["pin_memory"] = True
    if blocks:
        changes.append(
            "move batches with .to(device, non_blocking=True): the copy then runs while the host goes on, and "
            "overlaps the GPU's work when its source is pinned"
        )
        suggest["non_blocking"] = True
    how = [f"{pct(pageable)} of the bytes from pageable memory"] if from_pageable else []
    how += [f"{pct(blocking)} of the copies blocking"] if blocks else []
    return Finding(
        severity=WARNING if share >= th.H2D_WARNING else INFO,
        title=f"Copies to the GPU take {pct(share)} of each step",
        detail=f"{fmt_bytes(copied) if copied else 'the batches'} a step copied to the GPU{rate}; " + " and ".join(how),
        action=(
            _sentence("; ".join(changes))
            + ". Pageable copies are staged by the driver through a pinned buffer at about half the bandwidth, "
            "and a blocking copy holds the loop until it is done."
        ),
        source=SOURCE_PROBE,
        evidence={
            "h2d_share": round(share, 3),
            "h2d_s": None if seconds is None else round(seconds, 4),
            "h2d_bytes_per_step": copied,
            "h2d_pageable_share": pageable,
            "h2d_blocking_share": blocking,
            **({"loader_at": line.removeprefix(" at ")} if line else {}),
        },
        suggest=suggest,
    )


def _copies_to_change(step: StepAnatomy) -> bool:
    """Whether at least half the bytes copied to the GPU come from pageable memory, or at least half the copies
    block: pinned, asynchronous copies that still take a share are the bytes' cost."""
    pageable, blocking = step.h2d_pageable_share, step.h2d_blocking_share
    return (pageable is not None and pageable >= th.H2D_PAGEABLE_SHARE) or (
        blocking is not None and blocking >= th.H2D_PAGEABLE_SHARE
    )


PINNED = "pinned"
TURNED_OFF = "turned off"


def _pinning(sample: JobSample) -> str | None:
    """Whether the DataLoader pins its batches (``PINNED``: the probe says it runs with it, or its pin thread is
    seen), was asked to and runs without (``TURNED_OFF``), or neither (None): a setting already made is not
    suggested again."""
    loader = sample.loader
    if (loader is not None and loader.effective.pin_memory) or sample.view.pin_memory.state == PIN_ON:
        return PINNED
    if loader is not None and loader.requested.pin_memory and loader.effective.pin_memory is False:
        return TURNED_OFF
    return None


def _sentence(words: str) -> str:
    return words[:1].upper() + words[1:]


FP32 = frozenset(("fp32", "float32"))
"""``StepCost.precision`` of a step that keeps its matmuls off the tensor cores."""


def _mfu_causes(recent: JobWindow) -> list[tuple[str, float | None, str]]:
    """What ``low-mfu`` can see holding the step back: ``(cause, share of the step or None, words)``, the ones with
    a share first, the largest first."""
    found: list[tuple[str, float | None, str]] = []
    data = recent.median(DATA_SHARE)
    if data is not None and data >= th.DATA_WAIT_INFO:
        found.append(("data-wait", data, f"the loop waits for data {pct(data)} of each step (data-starved)"))
    h2d = recent.median(H2D_SHARE)
    if h2d is not None and h2d >= th.H2D_SHARE:
        step = recent.latest.step
        done = (
            step is not None
            and step.h2d_pageable_share is not None
            and step.h2d_blocking_share is not None
            and not _copies_to_change(step)
        )
        found.append(
            (
                "h2d-bytes" if done else "h2d",
                h2d,
                f"copies to the GPU take {pct(h2d)} of each step"
                + (", already pinned and asynchronous" if done else " (h2d-bound)"),
            )
        )
    syncs = sync_cost(recent)
    if syncs is not None and syncs.share >= th.HIDDEN_SYNC_SHARE:
        found.append(
            (
                "syncs",
                syncs.share,
                f"host syncs ({_call_words(syncs.sites[0])}) idle the GPU up to "
                f"{pct(syncs.share)} of each step (hidden-sync)",
            )
        )
    other = recent.median(OTHER_SHARE)
    main = main_thread_busy(recent)
    sm = recent.median(SM_ACTIVITY)
    busy = recent.median(GPU_BUSY)
    idle_sms = (sm is not None and sm <= th.LAUNCH_BOUND_SM_ACTIVITY) or (
        busy is not None and busy < th.LAUNCH_BOUND_GPU_BUSY
    )
    if main is not None and main >= th.MAIN_THREAD_BUSY and idle_sms:
        found.append(
            (
                "launch-bound",
                other,
                f"the main thread is on the CPU {pct(main)} of the time while the GPU's "
                "SMs wait: many small kernels, paced by Python (launch-bound)",
            )
        )
    elif other is not None and other >= th.OTHER_PHASE_SHARE:
        found.append(("other", other, f"the job's own code between the phases takes {pct(other)} of each step"))
    found.sort(key=lambda c: -(c[1] or 0.0))
    probe = recent.latest.view.probe
    cost = recent.latest.view.cost
    tensor = recent.median(TENSOR_ACTIVITY)
    full = cost is not None and cost.precision in FP32 and probe.float32_matmul_precision == th.FULL_PRECISION
    if full or (tensor is not None and tensor <= th.TENSOR_IDLE_PERCENT and (sm or 0.0) >= th.TENSOR_IDLE_SM_ACTIVITY):
        found.append(
            (
                "tensor-cores-idle",
                None,
                "the matmuls run in float32 without TF32: the tensor cores idle"
                + ("" if tensor is None else f" (tensor-core activity {tensor:.0f}%)"),
            )
        )
    memory = recent.median(GPU_MEMORY_FRACTION)
    under = (busy is not None and busy < th.BATCH_GPU_BUSY_BELOW) or (
        sm is not None and sm < th.BATCH_SM_ACTIVITY_BELOW
    )
    if memory is not None and memory < th.BATCH_MEMORY_BELOW and under:
        found.append(
            (
                "small-batch",
                None,
                f"the GPU's memory is {pct(memory)} used and its SMs are not kept busy: a "
                "larger batch gives each kernel more work (batch-too-small)",
            )
        )
    return found


MFU_REMEDIES = {
    "data-wait": "feed the loop faster: more DataLoader workers (data-starved gives the number)",
    "h2d": "pin the batches and copy them with non_blocking=True (h2d-bound)",
    "h2d-bytes": "copy fewer bytes: uint8 or bf16 batches converted on the GPU, decoding or augmentation there",
    "syncs": "read logged values every N steps and keep them on the GPU in between (hidden-sync)",
    "launch-bound": "give each launch more work: torch.compile (fuses kernels), CUDA graphs, a larger batch",
    "other": "look at the code between forward, backward and the optimizer: logging, metrics, work per sample",
    "tensor-cores-idle": "run the matmuls on the tensor cores: torch.autocast with bfloat16, or at least TF32 "
    '(torch.set_float32_matmul_precision("high"))',
    "small-batch": "raise batch_size",
}
"""What to change for each cause ``low-mfu`` names."""


def low_mfu(w: JobWindow, config: AdvisorConfig) -> Finding | None:
    """The step uses a small share of the GPU's peak FLOP/s; names the causes the window shows."""
    cost = w.latest.view.cost
    if cost is None or cost.mfu is None:
        return None
    recent = recent_window(w, config)
    if recent is None:
        return None
    mfu = recent.median(MFU)
    if mfu is None or mfu >= th.LOW_MFU:
        return None
    causes = _mfu_causes(recent)
    precision = f" {cost.precision}" if cost.precision else ""
    achieved = "" if cost.achieved_tflops is None else f"{cost.achieved_tflops:.1f} TFLOP/s"
    peak = "" if cost.peak_tflops is None else f" of the GPU's{precision} peak of {cost.peak_tflops:.0f}"
    line = loader_line(recent.latest)
    remedies = [MFU_REMEDIES[c[0]] + (line if c[0] == "small-batch" else "") for c in causes]
    return Finding(
        severity=WARNING if mfu < th.LOW_MFU_WARNING else INFO,
        title=f"Low MFU: the step uses {pct(mfu)} of the GPU's{precision} peak"
        + (f"; first cause: {causes[0][0]}" if causes else ""),
        detail=(achieved + peak + "; " if achieved else "")
        + ("what gputop sees: " + "; ".join(c[2] for c in causes) if causes else "none of the causes gputop can see"),
        action=(
            "First " + remedies[0] + "".join(f"; then {r}" for r in remedies[1:]) + "."
            if remedies
            else "The time goes to the kernels themselves (memory-bound operations, small matrices, a model shape "
            "the GPU runs poorly): torch.profiler names the slowest, and torch.compile fuses the memory-bound ones."
        ),
        source=SOURCE_BOTH,
        evidence={
            "mfu": round(mfu, 3),
            "achieved_tflops": cost.achieved_tflops,
            "peak_tflops": cost.peak_tflops,
            "precision": cost.precision,
            "causes": tuple(c[0] for c in causes),
            "cause_shares": tuple(None if c[1] is None else round(c[1], 3) for c in causes),
        },
    )
