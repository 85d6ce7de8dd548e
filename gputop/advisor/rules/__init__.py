"""The advisor's rules: one small pure function each, from a window of one training process's samples to a
finding, or None while its condition does not hold.

A rule judges the statistics of the last window (medians, shares, fitted trends) and says what to change, with
the measured numbers; when its finding is raised and cleared is the engine's business (``engine.py``). The
thresholds are in ``thresholds.py``, the computed values in ``suggest.py``; docs/advisor.md describes each rule.
The rules live by subject: ``pipeline``, ``workers``, ``memory``, ``leaks``, ``gpu``, ``phases`` (where the probe's
step goes) and ``step_time`` (how the step's time behaves); ``jobs`` holds the rules on a job of several ranks as a
whole.
"""

from __future__ import annotations

from gputop.advisor import thresholds as th
from gputop.advisor.rules.base import Finding, Rule
from gputop.advisor.rules.gpu import (
    cpu_bound_loop,
    gpu_idle,
    gpu_unhealthy,
    launch_bound,
    tensor_cores_idle,
    throttling,
    unhealthy,
)
from gputop.advisor.rules.jobs import JobFinding, JobRule, node_cpu_oversubscribed, rank_imbalance, straggler
from gputop.advisor.rules.leaks import empty_cache_in_loop, memory_leak
from gputop.advisor.rules.memory import batch_too_small, fragmentation, memory_near_full
from gputop.advisor.rules.phases import h2d_bound, hidden_sync, low_mfu
from gputop.advisor.rules.pipeline import data_starved, loader_in_main_process, persistent_workers_off, pin_memory_off
from gputop.advisor.rules.step_time import slow_warmup, step_drift, step_variance
from gputop.advisor.rules.workers import cuda_in_worker, too_many_workers, worker_memory_growth

RULES: tuple[Rule, ...] = (
    Rule("data-starved", data_starved),
    Rule("loader-in-main-process", loader_in_main_process),
    Rule("too-many-workers", too_many_workers),
    Rule("pin-memory-off", pin_memory_off),
    Rule("persistent-workers-off", persistent_workers_off),
    Rule("batch-too-small", batch_too_small),
    Rule("memory-near-full", memory_near_full),
    Rule("fragmentation", fragmentation),
    Rule("memory-leak", memory_leak),
    Rule("empty-cache-in-loop", empty_cache_in_loop),
    Rule("cpu-bound-loop", cpu_bound_loop),
    Rule("launch-bound", launch_bound),
    Rule("tensor-cores-idle", tensor_cores_idle),
    Rule("gpu-idle", gpu_idle, idle=True, gpu=True),
    Rule("throttling", throttling, gpu=True),
    Rule("gpu-unhealthy", gpu_unhealthy, gpu=True, at_once=True, idle_gpu=unhealthy),
    Rule("worker-memory-growth", worker_memory_growth),
    Rule("cuda-in-worker", cuda_in_worker),
    Rule("hidden-sync", hidden_sync, step=True),
    Rule("h2d-bound", h2d_bound, step=True),
    Rule("low-mfu", low_mfu, step=True),
    Rule("slow-warmup", slow_warmup, step=True),
    Rule("step-variance", step_variance, step=True),
    Rule("step-drift", step_drift, step=True),
)
JOB_RULES: tuple[JobRule, ...] = (
    JobRule("straggler", straggler, windows=th.STRAGGLER_HOLD_WINDOWS),
    JobRule("rank-imbalance", rank_imbalance),
    JobRule("node-cpu-oversubscribed", node_cpu_oversubscribed),
)
"""Rules on a job of several ranks as a whole (``jobs.py``)."""
RULE_IDS = tuple(rule.id for rule in RULES) + tuple(rule.id for rule in JOB_RULES)

__all__ = [
    "JOB_RULES",
    "RULES",
    "RULE_IDS",
    "Finding",
    "JobFinding",
    "JobRule",
    "Rule",
    "batch_too_small",
    "cpu_bound_loop",
    "cuda_in_worker",
    "data_starved",
    "empty_cache_in_loop",
    "fragmentation",
    "gpu_idle",
    "h2d_bound",
    "hidden_sync",
    "launch_bound",
    "loader_in_main_process",
    "low_mfu",
    "memory_leak",
    "memory_near_full",
    "node_cpu_oversubscribed",
    "persistent_workers_off",
    "pin_memory_off",
    "rank_imbalance",
    "slow_warmup",
    "step_drift",
    "step_variance",
    "straggler",
    "tensor_cores_idle",
    "throttling",
    "too_many_workers",
    "unhealthy",
    "worker_memory_growth",
]
