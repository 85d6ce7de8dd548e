"""The findings' words where a count is one: one core, one worker, said in the singular."""

from __future__ import annotations

import pytest

from gputop.advisor import AdvisorConfig
from gputop.advisor.rules import (
    cuda_in_worker,
    memory_near_full,
    node_cpu_oversubscribed,
    persistent_workers_off,
    too_many_workers,
    worker_memory_growth,
)
from tests.advisor.build import device, gpu, host, loader, row, sample, view, window, workers
from tests.advisor.test_jobs import job_of

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CONFIG = AdvisorConfig(window_s=10.0)


def test_workers_on_a_single_core_share_1_core():
    training = view(loader(wait=0.0, workers=3), workers(3, cpu=45.0, status="running"), usable=1)

    finding = too_many_workers(window(lambda t: sample(t, training, machine=host(cpu_percent=100, cores=1))), CONFIG)

    assert finding.title == "3 CPU-bound workers share 1 core"
    assert "× 1 rank on 1 usable core per rank" in finding.detail


def test_ranks_on_a_single_core_node_share_1_core():
    ranks = [{"workers": 1, "worker_status": "running"}] * 2

    found = node_cpu_oversubscribed(*job_of(*ranks, cores=1), CONFIG)

    assert found.finding.title == "2 ranks and 2 DataLoader workers share 1 core"
    assert "for 1 usable core;" in found.finding.detail
    assert "on every rank: 1 core ÷ 2 ranks" in found.finding.action


def test_the_memory_growth_of_one_worker_names_1_worker():
    def make(t: float):  # type: ignore[no-untyped-def]
        return sample(t, view(loader(), workers(1, uss_mib=100 + 20 * t)))

    finding = worker_memory_growth(window(make), CONFIG)

    assert finding.detail.startswith("own memory (USS) of 1 worker: up 200MiB in 10 s")


def test_one_allocation_retry_and_one_out_of_memory_error_are_each_in_the_singular():
    def make(t: float):  # type: ignore[no-untyped-def]
        probe = device(allocated_gib=40, reserved_gib=76, retries=1 if t > 0 else 0, ooms=1 if t > 0 else 0)
        return sample(t, view(loader(batch=64), workers(2), cuda=(probe,)), gpus=(gpu(used_gib=76),))

    finding = memory_near_full(window(make), CONFIG)

    assert "1 allocation retry in" in finding.detail
    assert "1 out-of-memory error" in finding.detail and "errors" not in finding.detail


def test_workers_started_anew_in_one_epoch_count_1_epoch():
    def make(t: float):  # type: ignore[no-untyped-def]
        epochs = 1 if t >= 6 else 0
        pipeline = loader(persistent=False, pass_start_s=3.0, workers=4, passes=epochs + 1, batches=int(t * 10))
        return sample(t, view(pipeline, workers(4), workers_replaced=epochs))

    finding = persistent_workers_off(window(make, seconds=12), CONFIG)

    assert finding.detail.startswith("1 epoch started in 12 s")


def test_one_worker_on_the_gpu_holds_a_context_and_two_hold_one_each():
    def on_gpu(*pids: int):  # type: ignore[no-untyped-def]
        rows = tuple(row(pid=pid, gib=0.5) for pid in pids)
        return window(lambda t: sample(t, view(loader(), workers(2)), gpus=(gpu(),), worker_rows=rows))

    one, two = cuda_in_worker(on_gpu(5001), CONFIG), cuda_in_worker(on_gpu(5001, 5002), CONFIG)

    assert (one.title, one.detail) == (
        "1 DataLoader worker holds a CUDA context",
        "worker PID 5001 on the GPU with 512MiB",
    )
    assert (two.title, two.detail) == (
        "2 DataLoader workers hold a CUDA context",
        "worker PIDs 5001, 5002 on the GPU with 1.00GiB",
    )
