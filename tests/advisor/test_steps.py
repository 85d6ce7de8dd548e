"""The rules on the probe's step anatomy, with plain model values: each fires on the step it is about with the line
and the number it computes, and stays silent on a near miss or without the anatomy."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.rules import h2d_bound, hidden_sync, low_mfu, slow_warmup, step_drift, step_variance
from gputop.model import INFO, WARNING, StepAnatomy, StepCost, SyncSite
from tests.advisor.build import gpu, loader, row, sample, snapshot, step, view, window, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CONFIG = AdvisorConfig(window_s=10.0)
ITEM = SyncSite("train.py:57", "item", 1.0)
STEP = {"data": 0.001, "h2d": 0.002, "forward": 0.015, "backward": 0.025, "optimizer": 0.004, "other": 0.003}
"""A 50 ms step on a GPU."""


def timed(
    anatomy: StepAnatomy | None,
    busy: float | None = 95.0,
    cost: StepCost | None = None,
    created_at: str | None = "train.py:41",
    main_busy: float = 0.3,
    sm: float | None = None,
    tensor: float | None = None,
    used_gib: float = 60,
    wait: float = 0.0,
    **gpu_figures,
):
    load = dataclasses.replace(loader(wait=wait), created_at=created_at)
    training = view(load, workers(2), main_busy=main_busy, anatomy=anatomy, cost=cost)
    gpus = (gpu(busy=busy, sm=sm, tensor=tensor, used_gib=used_gib, **gpu_figures),)
    return window(lambda t: sample(t, training, gpus=gpus))


def anatomy(**changes) -> StepAnatomy:
    phases = {**STEP, **{k: v for k, v in changes.items() if k in STEP}}
    return step(**phases, **{k: v for k, v in changes.items() if k not in STEP})


# -- hidden-sync ----------------------------------------------------------------------------------------------------


def test_hidden_sync_names_the_line_its_share_of_the_step_and_how_often_to_read_instead():
    # The GPU idles 11 % of the 50 ms step, 2 % of it while the loop waits for data: 9 %, 4.5 ms, is the syncs'.
    finding = hidden_sync(timed(anatomy(syncs=(ITEM,)), busy=89.0), CONFIG)

    assert finding.title == ".item() at train.py:57 makes the host wait for the GPU every step: up to 9% of the step"
    assert "ms of 50 ms" in finding.detail
    assert finding.evidence["site"] == "train.py:57" and finding.evidence["call"] == "item"
    assert finding.evidence["estimated_share"] == pytest.approx(0.09, abs=0.001)
    assert finding.suggest == {"log_every_steps": 10}  # 9 % ÷ 10 is under 1 % of the step
    assert "running += loss.detach()" in finding.action
    assert finding.severity == INFO


def test_hidden_sync_is_a_warning_when_the_gpu_idles_a_large_share_of_the_step():
    finding = hidden_sync(timed(anatomy(syncs=(ITEM,)), busy=70.0), CONFIG)
    assert finding.severity == WARNING and finding.suggest == {"log_every_steps": 50}


def test_hidden_sync_tells_a_data_dependent_shape_from_a_value_read():
    nonzero = SyncSite("model.py:12", "nonzero", 2.0)
    finding = hidden_sync(timed(anatomy(syncs=(nonzero,)), busy=80.0), CONFIG)

    assert finding.title.startswith(".nonzero() at model.py:12 makes the host wait for the GPU 2 times a step")
    assert "torch.where" in finding.action and finding.suggest == {}


@pytest.mark.parametrize(
    "case",
    [
        {"anatomy": anatomy(syncs=(ITEM,)), "busy": 98.0},  # the GPU never idles for it
        {"anatomy": anatomy(syncs=(SyncSite("train.py:80", "item", 0.01),)), "busy": 80.0},  # every 100 steps
        {"anatomy": anatomy(syncs=(ITEM,)), "busy": None},  # no GPU busy time: nothing to estimate the cost by
        {"anatomy": anatomy(), "busy": 80.0},  # no sync
        {"anatomy": None, "busy": 80.0},  # no step anatomy
    ],
    ids=["gpu-busy", "every-100-steps", "busy-unknown", "no-sync", "no-anatomy"],
)
def test_hidden_sync_silent(case):
    assert hidden_sync(timed(case["anatomy"], busy=case["busy"]), CONFIG) is None


# -- h2d-bound ------------------------------------------------------------------------------------------------------


def test_h2d_bound_pageable_copies_suggest_pinning_at_the_dataloaders_line():
    copies = anatomy(h2d=0.01, h2d_bytes=64 * 1024**2, pageable=1.0, blocking=0.0)
    finding = h2d_bound(timed(copies), CONFIG)

    assert finding.title == "Copies to the GPU take 17% of each step"
    assert finding.suggest == {"pin_memory": True}
    assert "Set pin_memory=True in the DataLoader at train.py:41" in finding.action
    assert finding.evidence["loader_at"] == "train.py:41"
    assert "64.0MiB a step copied to the GPU at 6.25GiB/s" in finding.detail


def test_h2d_bound_blocking_copies_suggest_non_blocking():
    finding = h2d_bound(timed(anatomy(h2d=0.03, pageable=0.0, blocking=1.0)), CONFIG)
    assert finding.suggest == {"non_blocking": True} and finding.severity == WARNING


def test_h2d_bound_silent_for_pinned_asynchronous_copies_or_a_small_share():
    assert h2d_bound(timed(anatomy(h2d=0.03, pageable=0.0, blocking=0.0)), CONFIG) is None
    assert h2d_bound(timed(anatomy(h2d=0.004, pageable=1.0, blocking=1.0)), CONFIG) is None


# -- low-mfu --------------------------------------------------------------------------------------------------------


def cost(mfu: float, precision: str = "bf16") -> StepCost:
    return StepCost(achieved_tflops=mfu * 989, peak_tflops=989, precision=precision, mfu=mfu)


def test_low_mfu_names_the_data_wait_first_when_it_is_the_largest_cause():
    finding = low_mfu(timed(anatomy(data=0.03), cost=cost(0.12), busy=60.0), CONFIG)

    assert finding.title == "Low MFU: the step uses 12% of the GPU's bf16 peak; first cause: data-wait"
    assert finding.evidence["causes"][0] == "data-wait"
    assert finding.action.startswith("First feed the loop faster")
    assert finding.severity == WARNING


def test_low_mfu_sees_idle_tensor_cores_in_float32():
    finding = low_mfu(timed(anatomy(), cost=cost(0.2, "fp32"), sm=70.0, tensor=0.0), CONFIG)
    assert finding.evidence["causes"] == ("tensor-cores-idle",) and finding.severity == INFO


def test_low_mfu_sees_a_launch_bound_loop():
    finding = low_mfu(timed(anatomy(), cost=cost(0.05), main_busy=0.97, sm=20.0), CONFIG)
    assert finding.evidence["causes"] == ("launch-bound",)


def test_low_mfu_sees_a_small_batch_and_names_its_line():
    finding = low_mfu(timed(anatomy(), cost=cost(0.2), busy=50.0, used_gib=10), CONFIG)
    assert "small-batch" in finding.evidence["causes"]
    assert "raise batch_size at train.py:41" in finding.action


def test_low_mfu_without_a_visible_cause_points_at_the_kernels():
    finding = low_mfu(timed(anatomy(), cost=cost(0.2), sm=80.0, tensor=40.0), CONFIG)
    assert finding.evidence["causes"] == () and "torch.profiler" in finding.action


def test_low_mfu_silent_at_a_good_mfu_or_without_one():
    assert low_mfu(timed(anatomy(data=0.03), cost=cost(0.45)), CONFIG) is None
    assert low_mfu(timed(anatomy(data=0.03), cost=StepCost(unavailable={"mfu": "unknown GPU model"})), CONFIG) is None


# -- step time ------------------------------------------------------------------------------------------------------


def test_slow_warmup_names_compilation_and_autotuning():
    finding = slow_warmup(timed(anatomy(warmup_s=4.0)), CONFIG)

    assert finding.title == "Slow warm-up: the first steps took 80× the steady step"
    assert "torch.compile" in finding.action and "cudnn.benchmark" in finding.action
    assert finding.severity == INFO


def test_slow_warmup_silent_for_a_short_or_a_proportionate_warm_up():
    assert slow_warmup(timed(anatomy(warmup_s=0.5)), CONFIG) is None  # 10× but half a second
    long_steps = {"forward": 1.0, "backward": 1.0}
    assert slow_warmup(timed(anatomy(warmup_s=5.0, **long_steps)), CONFIG) is None  # 2.4× of a 2 s step


def test_step_variance_when_one_step_in_twenty_is_much_slower():
    finding = step_variance(timed(anatomy(p95_s=0.2, step_s=0.04)), CONFIG)

    assert finding.title == "Uneven steps: one in 20 takes 5.0× the median step"
    assert finding.severity == WARNING
    assert finding.evidence["slow_steps_share"] == pytest.approx(0.2)  # a 50 ms mean over a 40 ms median


def test_step_variance_silent_for_steady_steps():
    assert step_variance(timed(anatomy(p95_s=0.06)), CONFIG) is None


def test_step_variance_leaves_a_loop_that_waits_for_data_to_data_starved():
    # Steps whose batch is ready and steps whose batch is not: uneven by nature, and data-starved's finding.
    assert step_variance(timed(anatomy(data=0.02, p95_s=0.2, step_s=0.04)), CONFIG) is None


def test_step_variance_and_drift_leave_a_loop_whose_loader_waits_to_data_starved():
    # The anatomy's data phase can read low while the loader's own wait reads high (a CI run: 9 % against 94 %).
    assert step_variance(timed(anatomy(p95_s=0.2, step_s=0.04)), CONFIG) is not None
    assert step_variance(timed(anatomy(p95_s=0.2, step_s=0.04), wait=0.5), CONFIG) is None
    assert step_drift(timed(drifting(1.6)), CONFIG) is not None
    assert step_drift(timed(drifting(1.6), wait=0.5), CONFIG) is None


def drifting(drift: float, steps: int = 10_000, **phases: float) -> StepAnatomy:
    """A step that has drifted, after ``steps`` steps (of 50 ms: 10,000 is 500 s of training)."""
    return dataclasses.replace(anatomy(drift=drift, **phases), steps=steps)


def test_step_drift_names_the_throttling_it_sees():
    finding = step_drift(timed(drifting(1.6), reasons=("sw_thermal_slowdown",)), CONFIG)

    assert finding.title == "Steps slow down: 60% slower than at the start"
    assert "its GPU is throttled in 100% of the samples" in finding.detail
    assert finding.severity == WARNING


def test_step_drift_silent_for_steady_steps_or_ones_that_sped_up():
    assert step_drift(timed(drifting(1.1)), CONFIG) is None
    assert step_drift(timed(drifting(0.7)), CONFIG) is None


def test_step_drift_waits_for_minutes_of_training():
    # 1000 steps of 50 ms: 50 s, in which a first window and the latest one compare moments of the machine's load.
    assert step_drift(timed(drifting(1.6, steps=1000)), CONFIG) is None
    assert step_drift(timed(drifting(1.6, steps=3000)), CONFIG) is not None  # 150 s


def test_step_drift_leaves_a_loop_that_waits_for_data_to_data_starved():
    # A loop whose steps are set by its loader: on the io-bound scenario under load the drift read 1.56.
    assert step_drift(timed(drifting(1.6, data=0.02)), CONFIG) is None


# -- the engine -----------------------------------------------------------------------------------------------------


def test_the_step_rules_are_raised_after_a_window_and_cleared_after_the_syncs_are_gone():
    synced = view(loader(), workers(2), anatomy=anatomy(syncs=(ITEM,)))
    fixed = view(loader(), workers(2), anatomy=anatomy())
    gpus = (gpu(busy=85.0),)
    advisor = Advisor(config=CONFIG)
    active = {}
    for tick in range(81):
        t = tick * 0.5
        active[t] = {a.id for a in advisor.update(snapshot(t, synced if t < 20 else fixed, gpus, (row(),)))}

    raised = min(t for t, ids in active.items() if "hidden-sync" in ids)
    first = 0.6 * CONFIG.window_s  # the first window's statistics: samples over 60 % of it
    assert first + 0.8 * CONFIG.window_s - 0.5 <= raised <= first + CONFIG.window_s
    cleared = min(t for t, ids in active.items() if t > 20 and "hidden-sync" not in ids)
    assert 20.0 + 0.8 * CONFIG.window_s - 0.5 <= cleared <= 20.0 + CONFIG.window_s


def test_no_step_rule_speaks_without_the_probes_step():
    training = view(loader(wait=0.05), workers(2))
    advisor = Advisor(config=CONFIG)
    ids = set()
    for tick in range(60):
        ids |= {a.id for a in advisor.update(snapshot(tick * 0.5, training, (gpu(busy=60.0),), (row(),)))}
    assert not ids & {"hidden-sync", "h2d-bound", "low-mfu", "slow-warmup", "step-variance", "step-drift"}
