"""Advice that can be followed once: the value a rule suggests for a setting, run, is one at which the advisor says
nothing more about it; the value stays one while the evidence moves within its noise; and a batch size given always
fits."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.rules import (
    batch_too_small,
    data_starved,
    h2d_bound,
    low_mfu,
    memory_near_full,
    persistent_workers_off,
    pin_memory_off,
)
from gputop.model import PIN_OFF, PIN_ON, Advice, CudaMemory, StepCost
from tests.advisor.build import (
    GIB,
    MIB,
    PID,
    device,
    gpu,
    host,
    loader,
    row,
    sample,
    snapshot,
    step,
    view,
    window,
    workers,
)

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CONFIG = AdvisorConfig(window_s=10.0)
TOTAL_GIB = 80

# -- batch_size -----------------------------------------------------------------------------------------------------
#
# A job whose step starts with 4 GiB allocated (weights, gradients, optimizer state) and adds 128 MiB a sample at its
# peak; the allocator reserves what it allocates, and the CUDA context takes 1 GiB beside it.

START_GIB = 4.0
SAMPLE_GIB = 0.125
CONTEXT_GIB = 1.0


def measured(
    batch: int,
    fixed_gib: float = 0.0,
    cache: float = 1.0,
    others_gib: float = 0.0,
    nvml: bool = True,
    emptied: bool = False,
):
    """The window of this job run at ``batch``, as the probe and NVML see it: its peak holds ``fixed_gib`` that does
    not grow with the batch, the allocator reserves ``cache`` times what it allocates (at its peak; where
    ``emptied``, the job hands its cache back to the driver after each step), and other processes hold ``others_gib``
    of the GPU (NVML lists this process only where ``nvml``)."""
    peak = START_GIB + fixed_gib + batch * SAMPLE_GIB
    reserved = START_GIB if emptied else peak * cache
    probe = device(
        allocated_gib=START_GIB,
        reserved_gib=reserved,
        peak_gib=peak,
        reserved_peak_gib=peak * cache,
        nvml_gib=reserved + CONTEXT_GIB if nvml else None,
    )
    used = reserved + CONTEXT_GIB + others_gib
    training = view(loader(wait=0.01, batch=batch, workers=2), workers(2), cuda=(probe,))
    return window(lambda t: sample(t, training, gpus=(gpu(busy=40.0, used_gib=used),)))


def suggested_batch(batch: int, fixed_gib: float = 0.0, others_gib: float = 0.0, nvml: bool = True) -> int:
    found = batch_too_small(measured(batch, fixed_gib, others_gib=others_gib, nvml=nvml), CONFIG)
    assert found is not None
    size = found.suggest["batch_size"]
    assert isinstance(size, int)
    return size


def test_at_the_batch_suggested_neither_memory_rule_says_more():
    # 32 samples: (80 × 0.8 - 1) - 4 = 59 GiB of room for samples, 472 of them. Run at 472, the peak is at 80 % of the
    # GPU; the allocator keeping 5 % more than the model counted stays below nearly full (90 %).
    told = suggested_batch(32)
    run = measured(told, cache=1.05)

    assert told == 472
    assert batch_too_small(run, CONFIG) is None
    assert memory_near_full(run, CONFIG) is None


def test_at_the_smaller_batch_memory_near_full_suggests_neither_memory_rule_says_more():
    # 600 samples peak at 79 GiB: the batch that peaks at 80 % is 472 (with 2 accumulation steps: 300).
    full = memory_near_full(measured(600), CONFIG)
    assert full is not None
    told = full.suggest["batch_size"]
    assert isinstance(told, int)
    run = measured(told, cache=1.05)

    assert told == 300
    assert memory_near_full(run, CONFIG) is None
    assert batch_too_small(run, CONFIG) is None


def test_at_the_batch_suggested_a_peak_with_less_than_a_quarter_more_room_asks_for_no_larger_one():
    # The job hands its cache back to the driver after each step, so NVML sees the GPU's memory 6 % used at 472;
    # its peak, 63 GiB, leaves room for no sample more.
    run = measured(suggested_batch(32), emptied=True)

    assert run.latest.gpus[0].memory_used_bytes == 5 * GIB
    assert batch_too_small(run, CONFIG) is None


def test_at_the_batch_suggested_a_peak_that_grew_less_than_counted_asks_for_no_larger_one_once_memory_is_half_used():
    # The first run's peak held 2 GiB that does not grow with the batch (a workspace): 32 samples measured 192 MiB
    # each and were told 312. At 312 the same 2 GiB weighs 7 MiB a sample, and the GPU's memory is 57 % used.
    told = suggested_batch(32, fixed_gib=2.0)
    run = measured(told, fixed_gib=2.0)

    assert told == 312
    assert batch_too_small(run, CONFIG) is None


def test_at_the_batch_suggested_real_room_beyond_the_noise_gets_a_larger_batch():
    # 16 GiB of the first run's peak does not grow with the batch (a first step's or an evaluation's peak): 32
    # samples measured 640 MiB each and were told 88. At 88 the GPU's memory is 40 % used, and the same 16 GiB
    # weighs 186 MiB a sample: 192 fit, more than twice 88. At 192 the advisor is silent.
    told = suggested_batch(32, fixed_gib=16.0)
    again = suggested_batch(told, fixed_gib=16.0)

    assert (told, again) == (88, 192)
    assert batch_too_small(measured(again, fixed_gib=16.0), CONFIG) is None


def test_a_batch_that_would_not_fit_beside_another_process_is_never_suggested():
    # NVML lists no process inside a container, so the process's own share of the GPU is unknown to it; another
    # process holds 30 GiB. Extrapolated linearly over the whole GPU, 544 samples (a 72 GiB peak) would be told, and
    # would not fit beside the 30 GiB. What is used on the GPU but PyTorch's reserved memory is not this process's
    # to grow into: 232 samples peak at 33 GiB, 64 GiB with the rest, 80 % of the GPU.
    told = suggested_batch(32, others_gib=30.0, nvml=False)
    peak_gib = START_GIB + told * SAMPLE_GIB

    assert told == 232
    assert peak_gib + CONTEXT_GIB + 30.0 <= 0.8 * TOTAL_GIB


def test_without_what_pytorch_reserved_no_batch_size_is_computed():
    # NVML lists no process and the probe reports no reserved memory: what is the process's to grow into is unknown.
    blind = CudaMemory(device=0, gpu_index=0, allocated_bytes=4 * GIB, allocated_peak_bytes=8 * GIB)
    training = view(loader(wait=0.01, batch=32, workers=2), workers(2), cuda=(blind,))

    found = batch_too_small(window(lambda t: sample(t, training, gpus=(gpu(busy=40.0, used_gib=9),))), CONFIG)

    assert found is not None and found.suggest == {}
    assert "how much of the GPU's memory is this process's to grow into" in found.action


def watched(make: Callable[[float], tuple[float, float]], seconds: float = 60) -> list[tuple[Advice, ...]]:
    """The findings after each snapshot of the job at batch 32, where ``make(t)`` gives the other processes' memory
    and the CUDA context's, in GiB."""
    advisor = Advisor(PID, AdvisorConfig(window_s=5))
    found = []
    for n in range(int(seconds / 0.5)):
        t = n * 0.5
        others, context = make(t)
        peak = START_GIB + 32 * SAMPLE_GIB
        probe = device(START_GIB, reserved_gib=peak, peak_gib=peak, reserved_peak_gib=peak, nvml_gib=peak + context)
        training = view(loader(wait=0.01, batch=32, workers=2), workers(2), cuda=(probe,))
        machine = (gpu(busy=40.0, used_gib=peak + context + others),)
        found.append(advisor.update(snapshot(1_700_000_000 + t, training, machine, (row(),))))
    return found


def told(found: Iterable[tuple[Advice, ...]]) -> list[Advice]:
    return [a for advice in found for a in advice if a.id == "batch-too-small"]


def batches(found: Iterable[tuple[Advice, ...]]) -> list[object]:
    return [a.suggest["batch_size"] for a in told(found)]


def test_the_suggested_batch_stays_one_value_while_the_room_grows_within_the_noise():
    # Another process's memory moves between 3 and 2 GiB from 10 s on: 448 fit, then 456. 448 stands: it still fits,
    # and 456 is less than a quarter above it.
    found = watched(lambda t: (3.0 if t < 10 or int(t) % 2 == 0 else 2.0, CONTEXT_GIB))

    assert len(batches(found)) > 80
    assert set(batches(found)) == {448}
    moved = [a for a in told(found) if a.evidence["batch_fits"] == 456]
    assert moved and "This window's memory gives 456: less than a quarter above 448" in moved[-1].action


def test_a_suggested_batch_that_no_longer_fits_is_replaced_at_once():
    # The other process grows from 3 to 4 GiB: 448 no longer fits at 80 % of the GPU; 440 does.
    found = watched(lambda t: (3.0 if t < 30 else 4.0, CONTEXT_GIB))

    assert batches(found)[0] == 448 and batches(found)[-1] == 440


def test_a_larger_batch_replaces_the_suggestion_once_the_room_grows_beyond_the_noise():
    # The other process frees 24 of its 27 GiB: 256 fit, then 448, far beyond a quarter more.
    found = watched(lambda t: (27.0 if t < 30 else 3.0, CONTEXT_GIB))

    assert batches(found)[0] == 256 and batches(found)[-1] == 448


def plans(others_gib: Callable[[float], float], seconds: float = 60) -> list[tuple[object, object]]:
    """The smaller batches and accumulation steps memory-near-full suggests, snapshot after snapshot, to a job at
    batch 96 whose step starts with 45 GiB and adds 256 MiB a sample, where other processes hold
    ``others_gib(t)``."""
    advisor = Advisor(PID, AdvisorConfig(window_s=5))
    found = []
    for n in range(int(seconds / 0.5)):
        t = n * 0.5
        peak = 45 + 96 * 0.25
        probe = device(45, reserved_gib=peak, peak_gib=peak, reserved_peak_gib=peak, nvml_gib=peak + CONTEXT_GIB)
        training = view(loader(batch=96, workers=2), workers(2), cuda=(probe,))
        machine = (gpu(busy=90.0, used_gib=peak + CONTEXT_GIB + others_gib(t)),)
        found.append(advisor.update(snapshot(1_700_000_000 + t, training, machine, (row(),))))
    full = [a for advice in found for a in advice if a.id == "memory-near-full"]
    return [(a.suggest["batch_size"], a.suggest["gradient_accumulation_steps"]) for a in full]


def test_the_smaller_batch_told_stays_one_value_while_the_room_moves():
    # 6.5 GiB held by others leaves room for 46 samples at 80 % of the GPU: 3 steps of 32. At 5.5 GiB 50 fit, 2
    # steps of 48 would: 32 still fits, and stands.
    told = plans(lambda t: 6.5 if t < 10 or int(t) % 2 == 0 else 5.5)

    assert len(told) > 80
    assert set(told) == {(32, 3)}


def test_a_smaller_batch_told_that_no_longer_fits_is_replaced():
    # From 30 s on, others hold 11 GiB: 28 samples fit, 32 no longer do; 3 steps of 32 become 4 of 24.
    told = plans(lambda t: 6.5 if t < 30 else 11.0)

    assert told[0] == (32, 3) and told[-1] == (24, 4)


# -- pin_memory -----------------------------------------------------------------------------------------------------

COPIES = {"data": 0.001, "h2d": 0.01, "forward": 0.015, "backward": 0.025, "optimizer": 0.004, "other": 0.003}
"""A 58 ms step on a GPU whose copies to it take 17 %."""


def copying(pin: bool, requested_pin: bool | None = None, pageable: float = 1.0, blocking: float = 0.0, **more):
    """A job whose copies to the GPU take 17 % of the step, ``pageable`` of their bytes from pageable memory."""
    anatomy = step(**COPIES, h2d_bytes=64 * MIB, pageable=pageable, blocking=blocking)
    load = loader(pin=pin, requested_pin=requested_pin, created_at="train.py:41")
    training = view(load, workers(2), pin=PIN_ON if pin else PIN_OFF, anatomy=anatomy, **more)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=95.0, used_gib=60),)))


def test_pin_memory_off_is_silent_once_pin_memory_is_set():
    assert pin_memory_off(copying(pin=True), CONFIG) is None


def test_pin_memory_off_is_silent_where_pinning_is_in_effect_but_its_thread_is_not_seen():
    # The probe says the iterator pins; from outside, no pt_data_pin thread (a torch that does not name it).
    load = loader(wait=0.35, workers=4, pin=True)
    training = view(load, workers(4), pin=PIN_OFF)

    assert pin_memory_off(window(lambda t: sample(t, training, gpus=(gpu(busy=60),))), CONFIG) is None


def test_h2d_bound_with_pin_memory_in_effect_says_why_the_bytes_are_still_pageable_instead_of_asking_again():
    found = h2d_bound(copying(pin=True), CONFIG)

    assert found is not None
    assert "pin_memory" not in found.suggest
    assert "Set pin_memory=True" not in found.action
    assert "The DataLoader at train.py:41 already runs with pin_memory=True, so the pageable bytes" in found.action


def test_h2d_bound_with_pin_memory_asked_for_and_turned_off_says_so_instead_of_asking_again():
    found = h2d_bound(copying(pin=False, requested_pin=True), CONFIG)

    assert found is not None
    assert "pin_memory" not in found.suggest
    assert "asks for pin_memory=True, but torch runs it without" in found.action


def test_low_mfu_does_not_ask_to_pin_copies_already_pinned_and_asynchronous():
    cost = StepCost(achieved_tflops=0.2 * 989, peak_tflops=989, precision="bf16", mfu=0.2)
    found = low_mfu(copying(pin=True, pageable=0.0, blocking=0.0, cost=cost), CONFIG)

    assert found is not None
    assert found.evidence["causes"] == ("h2d-bytes",)
    assert "pin the batches" not in found.action
    assert "already pinned and asynchronous" in found.detail


# -- persistent_workers ---------------------------------------------------------------------------------------------


def epochs(persistent: bool, rebuilt: bool, every_s: float = 3.0):
    """12 s of a job whose epochs last ``every_s``, each one's first batch 1.5 s after its iterator started where
    its workers start anew: at each epoch of its DataLoader where not ``persistent``, and at each epoch whatever the
    setting where the job builds a new DataLoader for each (``rebuilt``)."""

    def make(t):
        epoch = int(t // every_s)
        restarts = not persistent or rebuilt
        load = loader(
            persistent=persistent,
            pass_start_s=1.5 if restarts else 0.01,
            workers=4,
            passes=1 if rebuilt else epoch + 1,
            batches=int(t * 10),
            created_at="train.py:41",
        )
        return sample(t, view(load, workers(4), workers_replaced=epoch if restarts else 0))

    return window(make, seconds=12)


def test_persistent_workers_off_is_silent_once_persistent_workers_is_set():
    assert persistent_workers_off(epochs(persistent=True, rebuilt=False), CONFIG) is None


def test_workers_restarted_with_persistent_workers_set_are_told_why_instead_of_asked_for_it_again():
    # A new DataLoader each epoch: 4 sets of workers in 12 s, each 1.5 s to its first batch.
    found = persistent_workers_off(epochs(persistent=True, rebuilt=True), CONFIG)

    assert found is not None
    assert found.suggest == {}
    assert found.title.startswith("Workers restart although persistent_workers=True: 50%")
    assert "each epoch iterates a new DataLoader at train.py:41" in found.action
    assert "build it once, before the epoch loop" in found.action


# -- prefetch_factor ------------------------------------------------------------------------------------------------
#
# Five workers keep up with a loop of 40 steps/s on average (68 ms a batch, 20.5 ms of the loop's own work a step),
# but 5 % of the batches take 300 ms in a worker (a slow read), and the loop still waits 18 % of each step. Batches
# come back in the order asked: each is asked for prefetch_factor × 5 batches ahead, 2 × 5 × 20.5 = 205 ms at the
# default, too little for a 300 ms batch.


def queued(prefetch: int | None, slow_s: float | None = 0.300, wait: float = 0.18):
    """The window of that job at ``prefetch`` (None: torch's default), its slow batches taking ``slow_s``."""
    made = loader(wait=wait, steps=40.0, workers=5, worker_batch_s=0.068, worker_batch_p95_s=slow_s, prefetch=prefetch)
    training = view(made, workers(5), usable=8)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=40.0),), machine=host(cores=8)))


def suggested_prefetch(prefetch: int | None, slow_s: float | None = 0.300) -> object:
    found = data_starved(queued(prefetch, slow_s), CONFIG)
    assert found is not None
    return found.suggest.get("prefetch_factor")


def test_a_queue_too_short_for_the_slow_batches_gets_the_prefetch_factor_that_covers_them():
    found = data_starved(queued(2), CONFIG)

    assert found is not None
    assert found.suggest == {"prefetch_factor": 4}  # 300 × 1.25 headroom / (5 × 20.5) = 3.7
    assert found.action.startswith("Set prefetch_factor=4 (2 now). More workers would not help")
    assert "the slowest 5% of batches take 300 ms in a worker" in found.action
    assert found.evidence["worker_batch_p95_s"] == 0.3
    # torch's default is 2 where the DataLoader sets none.
    assert suggested_prefetch(None) == 4


def test_at_the_prefetch_factor_suggested_no_further_one_is_asked_for():
    told = suggested_prefetch(2)
    assert told == 4
    found = data_starved(queued(told), CONFIG)

    assert found is not None and found.suggest == {}
    assert "which covers the slow ones" in found.action
    assert "neither the workers' number nor the queue's depth" in found.action
    # The slow batches measured a fifth slower at the new depth (the noise of a percentile) ask for nothing either,
    # nor a third slower (the loop's own work measured that much shorter, as between two runs on a busy host).
    assert suggested_prefetch(told, slow_s=0.360) is None
    assert suggested_prefetch(told, slow_s=0.400) is None


def test_slow_batches_beyond_the_noise_of_what_the_queue_covers_ask_for_a_deeper_one():
    assert suggested_prefetch(4, slow_s=0.600) == 8  # 600 ms against 410 ms covered: beyond a quarter


def test_without_the_slow_batches_timed_no_prefetch_factor_is_computed():
    found = data_starved(queued(2, slow_s=None), CONFIG)

    assert found is not None and found.suggest == {}
    assert "a higher prefetch_factor rides that out" in found.action


def test_the_prefetch_factor_told_stays_one_value_while_the_slow_batches_move_within_the_noise():
    advisor = Advisor(PID, AdvisorConfig(window_s=5))
    told = []
    for n in range(80):
        t = n * 0.5
        slow_s = 0.300 if t < 10 else 0.330  # 330 × 1.25 / 102.5 = 4.02: 5 computed anew, within a quarter of 4
        made = loader(wait=0.18, steps=40.0, workers=5, worker_batch_s=0.068, worker_batch_p95_s=slow_s, prefetch=2)
        training = view(made, workers(5), usable=8)
        found = advisor.update(snapshot(1_700_000_000 + t, training, (gpu(busy=40.0),), (row(),)))
        told += [a.suggest.get("prefetch_factor") for a in found if a.id == "data-starved"]

    assert told and set(told) == {4}
