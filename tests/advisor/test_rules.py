"""Each rule, with plain model values: the window in which it fires, with the number it computes, and one where it
must stay silent."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.advisor.rules import (
    batch_too_small,
    cpu_bound_loop,
    cuda_in_worker,
    data_starved,
    empty_cache_in_loop,
    fragmentation,
    gpu_idle,
    launch_bound,
    loader_in_main_process,
    memory_leak,
    memory_near_full,
    persistent_workers_off,
    pin_memory_off,
    tensor_cores_idle,
    throttling,
    too_many_workers,
    worker_memory_growth,
)
from gputop.advisor.window import AdvisorConfig
from gputop.model import (
    CRITICAL,
    INFO,
    PIN_ON,
    SOURCE_BOTH,
    SOURCE_EXTERNAL,
    SOURCE_PROBE,
    WARNING,
    CpuTakers,
    CpuUse,
    HostProcess,
    TensorMemory,
)
from tests.advisor.build import GIB, MIB, PID, device, gpu, host, loader, row, sample, view, window, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CONFIG = AdvisorConfig(window_s=10.0)


# -- data-starved -------------------------------------------------------------------------------------------------


def starved(wait=0.5, nw=2, status="sleeping", cpu=2.0, cores=8, busy=40.0, main_cpu=None):
    training = view(loader(wait=wait, workers=nw), workers(nw, cpu=cpu, status=status), usable=cores)
    machine = host(cores=cores)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=busy),), machine=machine, process_cpu=main_cpu))


def test_data_starved_on_io_suggests_more_workers_than_cores():
    # Two workers asleep in I/O, loop waiting half of each step: 2 × T / C = 4, with 25 % headroom 5.
    finding = data_starved(starved(wait=0.5, nw=2, cores=2), CONFIG)

    assert finding.severity == WARNING
    assert finding.suggest == {"num_workers": 5}
    assert finding.evidence["bottleneck"] == "io"
    assert finding.source == SOURCE_BOTH


def test_data_starved_on_io_asks_for_no_more_workers_once_the_job_itself_fills_its_cores():
    # Ten workers asleep in I/O (each 15 % of a core unpickling and collating) beside a main process on 0.5 of a
    # core: the job uses 2.0 of its 2 usable cores. More workers would take turns on them; the last 30 % of wait
    # is the CPU's, not the worker count's.
    finding = data_starved(starved(wait=0.3, nw=10, cpu=15.0, cores=2, main_cpu=50.0), CONFIG)

    assert finding.suggest == {}
    assert finding.evidence["needed_workers"] == 18
    assert "More workers cannot help: the job's own processes already use 2.0 of its 2 usable cores" in (finding.action)
    # The same workers beside a main process that leaves a core free get their count.
    assert data_starved(starved(wait=0.3, nw=10, cpu=5.0, cores=2, main_cpu=20.0), CONFIG).suggest == {
        "num_workers": 16  # capped at 8 per usable core
    }


def timed_starved(wait: float, steps: float, nw: int, batch_s: float, cores: int = 8):
    """A loop starved by workers asleep in I/O, each of which the probe timed at ``batch_s`` a batch."""
    training = view(loader(wait=wait, steps=steps, workers=nw, worker_batch_s=batch_s), workers(nw), usable=cores)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=40.0),), machine=host(cores=cores)))


def test_data_starved_counts_workers_from_what_each_spends_on_a_batch():
    # One worker makes a batch in 68 ms; the loop waits 74 % of each step at 13 steps/s, so its own work is
    # 0.26 / 13 = 20 ms a step: 68 / 20 = 3.4 workers keep up, 5 with 25 % headroom (the step's share alone
    # would say 1 / 0.26 × 1.25 = 5 too, but only because that one worker is all the wait).
    finding = data_starved(timed_starved(wait=0.74, steps=13.0, nw=1, batch_s=0.068), CONFIG)

    assert finding.suggest == {"num_workers": 5}
    assert finding.evidence["workers_keeping_up"] == pytest.approx(3.4, abs=0.01)
    assert "a worker's 68 ms a batch ÷ the loop's own work per step is 5 with 25% headroom" in finding.action


def test_data_starved_asks_for_no_more_once_the_workers_deliver_more_than_the_loop_takes():
    # Followed once: 5 workers of 68 ms a batch, the loop at 40 steps/s still waiting 18 % (its own work 20.5 ms):
    # 3.3 workers would keep up, 5 do. The rest of the wait is not their number: the step's share alone would
    # have asked for 5 / 0.82 × 1.25 = 8 (and at 8, for more).
    finding = data_starved(timed_starved(wait=0.18, steps=40.0, nw=5, batch_s=0.068), CONFIG)

    assert finding.suggest == {}
    assert finding.evidence["needed_workers"] == 5
    assert finding.action.startswith(
        "More workers would not help: each of the 5 workers makes a batch in 68 ms, 74 batches/s together, more "
        "than the loop takes"
    )


def test_data_starved_asks_for_no_more_where_the_workers_fall_short_by_no_more_than_the_noise():
    # A first window suggested 3; run at 3, the loop's own work measures 21 ms a step, not 28: 67 / 21 = 3.2
    # workers would keep up, within a quarter of 3. Asking for 4 now would be the chase again.
    finding = data_starved(timed_starved(wait=0.11, steps=42.4, nw=3, batch_s=0.067), CONFIG)

    assert finding.suggest == {}
    assert "within the measurement's noise (a quarter) of what the loop takes" in finding.action
    # Short by more than that, the count is asked for.
    assert data_starved(timed_starved(wait=0.3, steps=40.0, nw=3, batch_s=0.067), CONFIG).suggest == {
        "num_workers": 5  # 67 / 17.5 = 3.8 workers, with 25 % headroom 4.8
    }


def test_data_starved_names_the_line_that_builds_the_dataloader():
    training = view(loader(wait=0.5, workers=2, created_at="train.py:41"), workers(2), usable=8)
    finding = data_starved(window(lambda t: sample(t, training, gpus=(gpu(busy=40.0),))), CONFIG)

    assert finding.action.startswith("Set num_workers=5 at train.py:41 (2 now)")


def test_data_starved_on_cpu_caps_workers_at_the_cores_less_the_main_process():
    finding = data_starved(starved(wait=0.5, nw=2, status="running", cpu=98.0, cores=4), CONFIG)

    assert finding.suggest == {"num_workers": 3}
    assert "capped at 3 by 4 usable cores" in finding.action


def test_data_starved_on_cpu_gives_the_workers_the_core_a_main_process_that_mostly_waits_leaves():
    # One CPU-bound worker on a 2-core host beside a main process on 0.3 of a core (its step mostly waits for the
    # GPU): 1.7 cores are theirs, 2 workers. Kept a whole core, the main process would have left them one, the
    # count they have: a sweep of that job gave 74 % of its best at 1 worker and 90 % at 2.
    finding = data_starved(starved(wait=0.5, nw=1, status="running", cpu=98.0, cores=2, main_cpu=30.0), CONFIG)

    assert finding.suggest == {"num_workers": 2}
    assert "capped at 2 by 2 usable cores less the main process's 0.3" in finding.action
    # At 2 the cores are spent: no other count.
    at_two = data_starved(starved(wait=0.3, nw=2, status="running", cpu=98.0, cores=2, main_cpu=30.0), CONFIG)
    assert at_two.suggest == {}
    # A main process on a core of its own leaves the one it has.
    busy_main = data_starved(starved(wait=0.5, nw=1, status="running", cpu=98.0, cores=2, main_cpu=95.0), CONFIG)
    assert busy_main.suggest == {}


def test_a_worker_read_runnable_by_chance_on_a_host_with_room_is_judged_by_its_cpu_time():
    # A worker that sleeps 1.5 ms and computes 0.25 ms a sample uses 0.2 of a core: seven readings a window, one
    # window in ten had it runnable in half of them, and it was called CPU-bound and capped at the cores.
    def one_worker(host_percent: float):
        training = view(loader(wait=0.8, workers=1), workers(1, cpu=20.0, status="running"), usable=2)
        machine = host(cpu_percent=host_percent, cores=2)
        return window(lambda t: sample(t, training, gpus=(gpu(busy=30),), machine=machine, process_cpu=10.0))

    with_room = data_starved(one_worker(40.0), CONFIG)
    saturated = data_starved(one_worker(100.0), CONFIG)  # runnable for want of a CPU: CPU-bound, as before

    assert with_room.evidence["bottleneck"] == "io" and with_room.suggest["num_workers"] > 2
    assert saturated.evidence["bottleneck"] == "cpu" and saturated.suggest.get("num_workers", 1) <= 2


def test_a_worker_on_a_cpu_most_of_the_time_is_cpu_bound_however_its_readings_fell():
    training = view(loader(wait=0.8, workers=1), workers(1, cpu=90.0, status="sleeping"), usable=2)
    finding = data_starved(window(lambda t: sample(t, training, gpus=(gpu(busy=30),), machine=host(cores=2))), CONFIG)

    assert finding.evidence["bottleneck"] == "cpu"


def test_data_starved_with_saturated_cpu_workers_says_more_cannot_help():
    finding = data_starved(starved(wait=0.5, nw=3, status="running", cpu=99.0, cores=4), CONFIG)

    assert finding.suggest == {}
    assert finding.evidence["bottleneck"] == "cpu"
    assert "More workers cannot help" in finding.action
    assert "cache the decoded data" in finding.action


def held_by_others(takers: CpuTakers | None):
    """One CPU-bound worker on a 2-core host that is 100 % busy: the worker gets 0.4 of a core, the training
    process 0.1, and another user's ``stress`` holds most of the rest."""
    training = view(loader(wait=0.5, workers=1), workers(1, cpu=40.0, status="running"), usable=2)
    machine = dataclasses.replace(host(cpu_percent=100.0, cores=2), cpu_takers=takers)
    process = HostProcess(PID, user="alice", cpu_percent=10.0)
    return window(
        lambda t: dataclasses.replace(sample(t, training, gpus=(gpu(busy=30),), machine=machine), process=process)
    )


OTHERS = CpuTakers(
    processes=(
        CpuUse(140.0, "bob", 777, "stress"),
        CpuUse(40.0, "alice", 5000, "pt_data_worker"),  # the job's own worker
        CpuUse(10.0, "alice", PID, "python"),
        CpuUse(9.0, "root", 1, "systemd"),
    ),
    users=(CpuUse(140.0, "bob"), CpuUse(50.0, "alice"), CpuUse(9.0, "root")),
)


def test_data_starved_names_the_processes_that_hold_the_cores_its_cpu_bound_workers_do_not_get():
    finding = data_starved(held_by_others(OTHERS), CONFIG)

    assert finding.suggest == {}
    assert (
        "1 worker, busy on the CPU (0.4 of 2 usable cores); the host's 2 CPUs are 100% busy, 1.5 cores of it "
        "other processes': stress (PID 777, bob) 1.4" in finding.detail
    )
    assert "spent" not in finding.action
    assert finding.action.startswith(
        "More workers cannot help: the workers are CPU-bound and other processes hold 1.5 of the host's 2 cores "
        "(stress, PID 777 of bob, the most: 1.4). Free those cores, or give the job cores of its own"
    )
    assert (finding.evidence["others_cpu_cores"], finding.evidence["others_pids"]) == (1.5, (777,))


def test_data_starved_says_when_the_snapshots_do_not_say_who_holds_the_cores():
    finding = data_starved(held_by_others(None), CONFIG)  # recorded before gputop kept who used the CPUs

    assert "1.5 cores of it other processes': which ones, these snapshots do not say" in finding.detail
    assert "spent" not in finding.action and "other processes hold 1.5 of the host's 2 cores." in finding.action


def test_data_starved_on_storage_names_the_storage():
    finding = data_starved(starved(wait=0.5, nw=4, status="disk-sleep", cpu=5.0), CONFIG)

    assert finding.suggest == {}
    assert "faster or local storage" in finding.action


def test_data_starved_is_only_a_note_between_10_and_30_percent():
    assert data_starved(starved(wait=0.2), CONFIG).severity == INFO


def test_data_starved_silent_when_the_wait_is_small():
    assert data_starved(starved(wait=0.05), CONFIG) is None


def test_data_starved_silent_when_the_gpu_is_busy_anyway():
    assert data_starved(starved(wait=0.5, busy=85.0), CONFIG) is None


def test_data_starved_leaves_the_waits_of_workers_starting_at_each_epoch_to_persistent_workers_off():
    # Of the 45 % of the time the loop waits, 40 % is for the first batch of each epoch, as the probe measures.
    restarting = loader(wait=0.45, persistent=False, pass_start_s=0.8, pass_start_wait_share=0.4)
    training = view(restarting, workers(2))

    assert data_starved(window(lambda t: sample(t, training)), CONFIG) is None
    persisting = view(
        dataclasses.replace(
            restarting,
            effective=dataclasses.replace(restarting.effective, persistent_workers=True),
            passes=3,
        ),
        workers(2),
    )
    assert data_starved(window(lambda t: sample(t, persisting)), CONFIG) is not None


def test_data_starved_leaves_out_the_wait_for_the_first_epochs_workers_to_start():
    # Persistent workers, slow to start once (a busy host, a slow worker_init_fn): 15 % of the time went to the
    # first batch, 3 % to the others.
    first_epoch = loader(wait=0.18, persistent=True, pass_start_s=1.5, pass_start_wait_share=0.15, passes=1)
    on_a_gpu = (gpu(busy=35),)

    assert data_starved(window(lambda t: sample(t, view(first_epoch, workers(1)), gpus=on_a_gpu)), CONFIG) is None
    assert pin_memory_off(window(lambda t: sample(t, view(first_epoch, workers(1)), gpus=on_a_gpu)), CONFIG) is None
    later = dataclasses.replace(first_epoch, passes=2)  # an epoch's start with persistent workers is no start-up
    assert data_starved(window(lambda t: sample(t, view(later, workers(1)), gpus=on_a_gpu)), CONFIG) is not None


def test_data_starved_silent_before_a_whole_window():
    short = window(lambda t: starved().latest, seconds=3)

    assert data_starved(short, CONFIG) is None


# -- loader-in-main-process ---------------------------------------------------------------------------------------


def in_main(wait=0.8, main_busy=1.0, cores=2):
    training = view(loader(wait=wait, workers=0), main_busy=main_busy, usable=cores)
    return window(lambda t: sample(t, training, machine=host(cores=cores)))


def test_loader_in_main_process_loading_on_the_cpu_is_capped_at_the_free_cores():
    # Loading takes 4× the compute: 5 workers with headroom, but 2 cores leave one for a worker.
    finding = loader_in_main_process(in_main(wait=0.8, main_busy=1.0, cores=2), CONFIG)

    assert finding.suggest == {"num_workers": 1}
    assert finding.evidence["bottleneck"] == "cpu"
    assert finding.severity == WARNING


def test_loader_in_main_process_names_the_line_that_builds_the_dataloader():
    training = view(loader(wait=0.8, workers=0, created_at="train.py:41"), main_busy=1.0, usable=2)
    finding = loader_in_main_process(window(lambda t: sample(t, training, machine=host(cores=2))), CONFIG)

    assert finding.action.startswith("Set num_workers=1 at train.py:41:")


def test_loader_in_main_process_loading_asleep_is_not_capped():
    # The main thread is on the CPU only while it computes (20 % of a step): loading sleeps.
    finding = loader_in_main_process(in_main(wait=0.8, main_busy=0.2, cores=2), CONFIG)

    assert finding.suggest == {"num_workers": 5}
    assert finding.evidence["bottleneck"] == "io"


def test_loader_in_main_process_silent_with_workers():
    training = view(loader(wait=0.8, workers=2), workers(2))

    assert loader_in_main_process(window(lambda t: sample(t, training)), CONFIG) is None


def test_loader_in_main_process_silent_when_loading_is_quick():
    assert loader_in_main_process(in_main(wait=0.05), CONFIG) is None


# -- too-many-workers ---------------------------------------------------------------------------------------------


def test_too_many_cpu_bound_workers_on_a_saturated_host():
    training = view(loader(wait=0.0, workers=8), workers(8, cpu=45.0, status="running"), usable=4)

    finding = too_many_workers(window(lambda t: sample(t, training, machine=host(cpu_percent=100, cores=4))), CONFIG)

    assert finding.suggest == {"num_workers": 3}
    assert finding.severity == WARNING


def test_too_many_idle_workers_holding_memory():
    training = view(loader(wait=0.0, workers=8), workers(8, cpu=1.0, uss_mib=200))

    finding = too_many_workers(window(lambda t: sample(t, training)), CONFIG)

    assert finding.suggest == {"num_workers": 4}
    assert finding.evidence["workers_uss_bytes"] == 1600 * MIB


def test_too_many_workers_silent_when_they_fit_the_cores():
    training = view(loader(wait=0.0, workers=2), workers(2, cpu=90.0, status="running"), usable=4)

    assert too_many_workers(window(lambda t: sample(t, training, machine=host(100, cores=4))), CONFIG) is None


def test_too_many_workers_silent_when_idle_workers_are_small():
    training = view(loader(wait=0.0, workers=8), workers(8, cpu=1.0, uss_mib=20))

    assert too_many_workers(window(lambda t: sample(t, training)), CONFIG) is None


# -- pin-memory-off -----------------------------------------------------------------------------------------------


def test_pin_memory_off_in_a_cuda_job_waiting_for_data():
    training = view(loader(wait=0.35, workers=4), workers(4))

    finding = pin_memory_off(window(lambda t: sample(t, training, gpus=(gpu(busy=60),))), CONFIG)

    assert finding.suggest == {"pin_memory": True}
    assert "non_blocking=True" in finding.action
    assert finding.severity == WARNING


def test_pin_memory_off_names_the_line_that_builds_the_dataloader():
    training = view(loader(wait=0.35, workers=4, created_at="data.py:12"), workers(4))
    finding = pin_memory_off(window(lambda t: sample(t, training, gpus=(gpu(busy=60),))), CONFIG)

    assert "Set pin_memory=True in the DataLoader at data.py:12 and move batches" in finding.action


def test_pin_memory_off_with_heavy_host_to_device_traffic():
    training = view(loader(wait=0.0, workers=4), workers(4))
    busy_bus = gpu(busy=95, rx_bytes_per_s=4 * GIB)

    finding = pin_memory_off(window(lambda t: sample(t, training, gpus=(busy_bus,))), CONFIG)

    assert finding.evidence["pcie_rx_bytes_per_s"] == 4 * GIB


@pytest.mark.parametrize(
    "training",
    [
        view(loader(wait=0.35, workers=4, pin=True), workers(4), pin=PIN_ON),
        # requested, but torch turned it off: a machine without an accelerator
        view(loader(wait=0.35, workers=4, requested_pin=True), workers(4)),
    ],
)
def test_pin_memory_off_silent_when_pinning_is_on_or_was_asked_for(training):
    assert pin_memory_off(window(lambda t: sample(t, training, gpus=(gpu(busy=60),))), CONFIG) is None


def test_pin_memory_off_silent_without_a_gpu():
    training = view(loader(wait=0.35, workers=4), workers(4))

    assert pin_memory_off(window(lambda t: sample(t, training)), CONFIG) is None


# -- persistent-workers-off ---------------------------------------------------------------------------------------


def restarting(persistent=False, pass_start_s=1.5, every_s=3.0):
    def make(t):
        epochs = int(t // every_s)
        training = view(
            loader(persistent=persistent, pass_start_s=pass_start_s, workers=4, passes=epochs + 1, batches=int(t * 10)),
            workers(4),
            workers_replaced=0 if persistent else epochs,  # workers that persist are not replaced
        )
        return sample(t, training)

    return window(make, seconds=12)


def test_persistent_workers_off_when_restarts_take_a_share_of_the_time():
    # 4 epochs in 12 s, each 1.5 s to its first batch, where the loop waits for no other batch: half the time.
    finding = persistent_workers_off(restarting(), CONFIG)

    assert finding.suggest == {"persistent_workers": True}
    assert finding.severity == WARNING
    assert finding.evidence["startup_share"] == 0.5


def test_persistent_workers_off_silent_when_workers_start_quickly():
    assert persistent_workers_off(restarting(pass_start_s=0.1), CONFIG) is None


def test_persistent_workers_off_silent_when_workers_persist():
    assert persistent_workers_off(restarting(persistent=True), CONFIG) is None


# -- batch-too-small ----------------------------------------------------------------------------------------------


def underfilled(cuda=(), busy=40.0, wait=0.01, used_gib=10):
    training = view(loader(wait=wait, batch=32, workers=2), workers(2), cuda=cuda)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=busy, used_gib=used_gib),)))


def test_batch_too_small_computes_the_batch_that_fits_from_the_probes_memory_model():
    # 4 GiB at a step's start, 8 GiB peak for 32 samples: 128 MiB a sample. The allocator reserves 9/8 of what
    # it allocates and the CUDA context takes 1 GiB; the peak aims at 80 % of the GPU:
    # (80 × 0.8 - 1) / 1.125 - 4 = 52 GiB → 416 samples.
    probe = device(allocated_gib=4, reserved_gib=9, peak_gib=8, reserved_peak_gib=9, nvml_gib=10)

    finding = batch_too_small(underfilled(cuda=(probe,)), CONFIG)

    assert finding.suggest == {"batch_size": 416}
    assert finding.evidence["per_sample_bytes"] == 128 * MIB
    assert finding.evidence["suggested_peak_bytes"] <= 0.8 * 80 * GIB - GIB
    assert finding.source == SOURCE_BOTH


def test_batch_too_small_names_the_line_that_builds_the_dataloader():
    probe = device(allocated_gib=4, reserved_gib=9, peak_gib=8, reserved_peak_gib=9, nvml_gib=10)
    training = view(loader(wait=0.01, batch=32, workers=2, created_at="train.py:41"), workers(2), cuda=(probe,))
    finding = batch_too_small(window(lambda t: sample(t, training, gpus=(gpu(busy=40.0, used_gib=10),))), CONFIG)

    assert finding.action.startswith("Set batch_size=416 at train.py:41 (32 now)")


def test_batch_too_small_names_what_a_step_starts_with_part_by_part():
    probe = device(allocated_gib=4, reserved_gib=9, peak_gib=8, reserved_peak_gib=9, nvml_gib=10)
    training = with_tensors(view(loader(wait=0.01, batch=32, workers=2), workers(2), cuda=(probe,)), parts(1, 1, 2, 4))

    finding = batch_too_small(window(lambda t: sample(t, training, gpus=(gpu(busy=40, used_gib=10),))), CONFIG)

    assert finding.suggest == {"batch_size": 416}
    assert "allocated (weights 1.00GiB, gradients 1.00GiB, optimizer state 2.00GiB, other tensors 0B)" in (
        finding.action
    )
    assert "each sample adds 128MiB of activations" in finding.action


def test_batch_too_small_without_the_probe_gives_the_direction_and_how_to_get_a_number():
    training = view(worker_list=workers(2))

    finding = batch_too_small(window(lambda t: sample(t, training, gpus=(gpu(busy=40, used_gib=10),))), CONFIG)

    assert finding.suggest == {}
    assert "gputop run" in finding.action
    assert finding.source == SOURCE_EXTERNAL


def test_batch_too_small_with_the_probe_but_no_dataloader_says_the_batch_size_is_unknown():
    probe = device(allocated_gib=4, reserved_gib=9, peak_gib=8, reserved_peak_gib=9, nvml_gib=10)
    training = view(worker_list=(), cuda=(probe,))

    finding = batch_too_small(window(lambda t: sample(t, training, gpus=(gpu(busy=40, used_gib=10),))), CONFIG)

    assert finding.suggest == {}
    assert "the probe sees no DataLoader in this job, so the batch size is not known" in finding.action
    assert "gputop run" not in finding.action  # it already runs under the probe


def test_batch_too_small_silent_when_the_gpu_is_busy():
    assert batch_too_small(underfilled(busy=95), CONFIG) is None


def test_batch_too_small_silent_when_the_job_is_data_starved():
    assert batch_too_small(underfilled(wait=0.4), CONFIG) is None


def test_batch_too_small_silent_when_memory_is_half_used():
    assert batch_too_small(underfilled(used_gib=50), CONFIG) is None


# -- memory-near-full ---------------------------------------------------------------------------------------------


def full(cuda=(), used_gib=76, retries=0):
    def make(t):
        devices = tuple(device(**{**d, "retries": int(t) * retries}) for d in cuda)
        return sample(t, view(loader(batch=64), workers(2), cuda=devices), gpus=(gpu(used_gib=used_gib),))

    return window(make)


def test_memory_near_full_from_nvml_alone_is_a_note():
    finding = memory_near_full(full(), CONFIG)

    assert finding.severity == INFO
    assert finding.source == SOURCE_EXTERNAL
    assert "mixed precision" in finding.action


def test_memory_near_full_with_retries_suggests_a_smaller_batch_and_accumulation():
    # 40 GiB at a step's start, 74 GiB peak for 64 samples (0.53 GiB each); a peak at 80 % of the GPU leaves room
    # for 41: two steps of 32 keep the effective batch of 64.
    probe = {"allocated_gib": 40, "reserved_gib": 76, "peak_gib": 74, "reserved_peak_gib": 76, "nvml_gib": 76.5}

    finding = memory_near_full(full(cuda=(probe,), retries=1), CONFIG)

    assert finding.severity == WARNING
    assert finding.suggest == {"batch_size": 32, "gradient_accumulation_steps": 2}
    assert finding.evidence["alloc_retries"] == 10


def test_memory_near_full_silent_with_room():
    assert memory_near_full(full(used_gib=40), CONFIG) is None


# -- fragmentation ------------------------------------------------------------------------------------------------


def fragmented(retries_per_s=1, allocated_gib=12):
    def make(t):
        probe = device(allocated_gib=allocated_gib, reserved_gib=20, retries=int(t * retries_per_s))
        return sample(t, view(loader(), cuda=(probe,)), gpus=(gpu(),))

    return window(make)


def test_fragmentation_suggests_expandable_segments():
    finding = fragmentation(fragmented(), CONFIG)

    assert finding.suggest == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert finding.evidence["unallocated_reserved_share"] == 0.4
    assert finding.source == SOURCE_PROBE


def test_fragmentation_silent_without_retries():
    assert fragmentation(fragmented(retries_per_s=0), CONFIG) is None


def test_fragmentation_silent_when_the_cache_is_mostly_in_use():
    assert fragmentation(fragmented(allocated_gib=18), CONFIG) is None


# -- memory-leak --------------------------------------------------------------------------------------------------


def test_memory_leak_on_the_gpu_from_allocated_memory_at_step_starts():
    # 100 MiB more every second, with 40 GiB free: full in under 7 minutes.
    def make(t):
        probe = device(allocated_gib=10 + t * 100 / 1024)
        return sample(t, view(loader(batches=100 + int(t * 10)), cuda=(probe,)), gpus=(gpu(),))

    finding = memory_leak(window(make), CONFIG)

    assert finding.severity == CRITICAL
    assert finding.evidence["rate_bytes_per_s"] == pytest.approx(100 * MIB, rel=0.01)
    assert "loss.item()" in finding.action


def test_memory_leak_from_host_memory_without_the_probes_cuda_figures():
    finding = memory_leak(window(lambda t: sample(t, view(), rss=int(GIB + t * 10 * MIB))), CONFIG)

    assert finding.source == SOURCE_EXTERNAL
    assert finding.evidence["measure"] == "the training process's RSS"


def test_memory_leak_silent_on_flat_memory_with_noise():
    noise = [0, 3, -2, 1, -3, 2, 0, -1, 3, -2, 1]

    def make(t):
        return sample(t, view(), rss=GIB + noise[int(t) % len(noise)] * MIB)

    assert memory_leak(window(make), CONFIG) is None


def test_memory_leak_silent_during_warm_up():
    # The first steps allocate optimizer state: memory rises, but the job has made only 10 steps.
    def make(t):
        probe = device(allocated_gib=10 + t)
        return sample(t, view(loader(batches=int(t)), cuda=(probe,)), gpus=(gpu(),))

    assert memory_leak(window(make), CONFIG) is None


# -- empty-cache-in-loop ------------------------------------------------------------------------------------------


def emptied(frees_per_s=30, reserved_gib=10.0):
    def make(t):
        probe = device(allocated_gib=10, reserved_gib=reserved_gib, frees=int(t * frees_per_s))
        return sample(t, view(loader(batches=int(t * 10) + 100), cuda=(probe,)), gpus=(gpu(),))

    return window(make)


def test_empty_cache_in_loop_when_the_cache_goes_back_every_step():
    finding = empty_cache_in_loop(emptied(), CONFIG)

    assert finding.severity == WARNING
    assert "torch.cuda.empty_cache()" in finding.action


def test_empty_cache_in_loop_silent_when_the_cache_is_kept():
    assert empty_cache_in_loop(emptied(frees_per_s=0, reserved_gib=14), CONFIG) is None


# -- cpu-bound-loop -----------------------------------------------------------------------------------------------


def looping(main_busy=0.97, busy=30.0):
    status = "running" if main_busy > 0.75 else "sleeping"
    training = view(loader(wait=0.02), workers(2), main_busy=main_busy, main_status=status)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=busy),)))


def test_cpu_bound_loop_when_the_main_thread_is_always_on_the_cpu():
    finding = cpu_bound_loop(looping(), CONFIG)

    assert "torch.compile" in finding.action
    assert finding.evidence["main_thread_busy_share"] >= 0.97


def test_cpu_bound_loop_silent_when_the_gpu_is_busy():
    assert cpu_bound_loop(looping(busy=90), CONFIG) is None


def test_cpu_bound_loop_silent_when_the_main_thread_waits():
    assert cpu_bound_loop(looping(main_busy=0.4), CONFIG) is None


# -- launch-bound -------------------------------------------------------------------------------------------------


def launching(main_busy=0.98, busy=96.0, sm=16.0, wait=0.01):
    status = "running" if main_busy > 0.75 else "sleeping"
    training = view(loader(wait=wait), workers(2), main_busy=main_busy, main_status=status)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=busy, sm=sm, occupancy=9.0),)))


def test_launch_bound_when_a_busy_gpu_has_idle_sms_and_the_main_thread_never_rests():
    finding = launch_bound(launching(), CONFIG)

    assert finding.severity == WARNING and finding.source == SOURCE_BOTH
    assert "GPU busy 96% but SM activity 16% (occupancy 9%)" in finding.detail
    assert "CUDA graphs" in finding.action and ".item()" in finding.action and "larger batch" in finding.action
    assert finding.evidence["sm_activity_percent"] == 16.0 and finding.evidence["main_thread_busy_share"] >= 0.98


@pytest.mark.parametrize(
    "changes",
    [
        {"sm": 70.0},  # the SMs are busy: big kernels
        {"sm": None},  # no GPM: nothing to say
        {"busy": 60.0},  # cpu-bound-loop's business
        {"main_busy": 0.4},  # the main thread waits (on the GPU, say)
        {"wait": 0.4},  # the loop waits for data: data-starved's business
    ],
)
def test_launch_bound_silent_otherwise(changes):
    assert launch_bound(launching(**changes), CONFIG) is None


# -- tensor-cores-idle --------------------------------------------------------------------------------------------


def fp32_step(sm=74.0, tensor=0.0, autocast=False, precision="highest", dtypes=("float32",)):
    training = view(loader(wait=0.02), workers(2))
    probe = dataclasses.replace(
        training.probe, autocast=autocast, float32_matmul_precision=precision, parameter_dtypes=dtypes
    )
    training = dataclasses.replace(training, probe=probe)
    return window(lambda t: sample(t, training, gpus=(gpu(busy=97, sm=sm, tensor=tensor, fp32=55.0),)))


def test_tensor_cores_idle_when_the_sms_work_in_full_float32():
    finding = tensor_cores_idle(fp32_step(), CONFIG)

    assert finding.severity == INFO and finding.source == SOURCE_BOTH
    assert "SM activity 74% but tensor-core activity 0%, FP32 pipes 55%" in finding.detail
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in finding.action
    assert 'set_float32_matmul_precision("high")' in finding.action
    assert finding.evidence["parameter_dtypes"] == ("float32",)


@pytest.mark.parametrize(
    "changes",
    [
        {"tensor": 40.0},  # the tensor cores work
        {"tensor": None},  # no GPM tensor metric
        {"sm": 20.0},  # little work at all
        {"autocast": True},  # the loop runs in autocast: its idle tensor cores are not a matter of dtype
        {"autocast": None},  # a probe that does not say
        {"precision": "high"},  # TF32 allowed already
        {"dtypes": ("bfloat16",)},
        {"dtypes": None},  # no optimizer step seen
    ],
)
def test_tensor_cores_idle_silent_otherwise(changes):
    assert tensor_cores_idle(fp32_step(**changes), CONFIG) is None


# -- gpu-idle -----------------------------------------------------------------------------------------------------


def test_gpu_idle_names_a_lock_when_the_main_thread_sleeps_in_a_futex():
    training = view(loader(steps=0.0), main_busy=0.0, wait_channel="futex_wait_queue")

    finding = gpu_idle(window(lambda t: sample(t, training, gpus=(gpu(busy=0),)), seconds=30), CONFIG)

    assert finding.evidence["idle_s"] == 30
    assert "lock (futex)" in finding.detail
    assert finding.evidence["gpu_memory_bytes"] == 20 * GIB


def test_gpu_idle_names_the_input_when_the_loop_waits_for_a_batch():
    training = view(loader(steps=0.0, waiting_now_s=45.0), main_busy=0.0, wait_channel="do_sys_poll")

    finding = gpu_idle(window(lambda t: sample(t, training, gpus=(gpu(busy=0),))), CONFIG)

    assert "waited 45 s for its next batch" in finding.detail


def test_gpu_idle_silent_while_the_gpu_works():
    assert gpu_idle(window(lambda t: sample(t, view(), gpus=(gpu(busy=3),))), CONFIG) is None


def test_gpu_idle_silent_for_a_process_without_gpu_memory():
    assert gpu_idle(window(lambda t: sample(t, view(), gpus=(gpu(busy=0),), rows=(row(gib=0),))), CONFIG) is None


# -- throttling ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reasons", "clock", "severity"),
    [
        (("hw_thermal_slowdown",), 1200, CRITICAL),
        (("sw_thermal_slowdown",), 1500, WARNING),
        (("sw_power_cap",), 1100, INFO),
    ],
)
def test_throttling_by_reason(reasons, clock, severity):
    slowed = gpu(reasons=reasons, clock=clock)

    finding = throttling(window(lambda t: sample(t, view(), gpus=(slowed,))), CONFIG)

    assert finding.severity == severity
    assert finding.evidence["reasons"] == reasons


def test_throttling_silent_at_the_power_cap_with_the_clocks_near_their_maximum():
    # A busy H100 at its power limit trims its clocks a little: that is how it is meant to run.
    capped = gpu(reasons=("sw_power_cap",), clock=1755)

    assert throttling(window(lambda t: sample(t, view(), gpus=(capped,))), CONFIG) is None


# -- worker-memory-growth -----------------------------------------------------------------------------------------


def test_worker_memory_growth_when_the_workers_own_memory_rises_steadily():
    def make(t):
        return sample(t, view(loader(), workers(2, uss_mib=100 + 20 * t)))

    finding = worker_memory_growth(window(make), CONFIG)

    assert finding.evidence["rise_bytes"] == 400 * MIB
    assert "numpy arrays" in finding.action


def test_worker_memory_growth_silent_on_flat_worker_memory():
    assert worker_memory_growth(window(lambda t: sample(t, view(loader(), workers(2)))), CONFIG) is None


# -- cuda-in-worker -----------------------------------------------------------------------------------------------


def test_cuda_in_worker_when_a_worker_is_on_the_gpu():
    training = view(loader(), workers(2))

    finding = cuda_in_worker(
        window(lambda t: sample(t, training, gpus=(gpu(),), worker_rows=(row(pid=5001, gib=0.5),))), CONFIG
    )

    assert finding.evidence["worker_pids"] == (5001,)
    assert "collate_fn" in finding.action


def test_cuda_in_worker_silent_when_only_the_main_process_is_on_the_gpu():
    training = view(loader(), workers(2))

    assert cuda_in_worker(window(lambda t: sample(t, training, gpus=(gpu(),))), CONFIG) is None


def with_tensors(training, tensors, **probe):
    return dataclasses.replace(training, probe=dataclasses.replace(training.probe, tensors=tensors, **probe))


def full_with_parts(tensors, optimizers=("AdamW",), used_gib=76, world_size=None, autocast=None, **stats):
    cuda = device(**{"allocated_gib": 40, "reserved_gib": 76, "peak_gib": 74, "nvml_gib": 76.5, **stats})

    def make(t):
        training = view(loader(batch=64), workers(2), cuda=(cuda,))
        training = with_tensors(training, tensors, optimizers=optimizers, world_size=world_size, autocast=autocast)
        return sample(t, training, gpus=(gpu(used_gib=used_gib),))

    return window(make)


def parts(weights_gib, gradients_gib, optimizer_gib, after_step_gib, dtype="float32"):
    return (
        TensorMemory(
            "cuda:0",
            parameters=int(weights_gib * GIB / 4),
            weights_bytes=int(weights_gib * GIB),
            gradients_bytes=int(gradients_gib * GIB),
            optimizer_bytes=int(optimizer_gib * GIB),
            weight_dtypes=((dtype, int(weights_gib * GIB)),),
            allocated_after_step_bytes=int(after_step_gib * GIB),
        ),
    )


def test_memory_near_full_names_the_optimizer_state_when_it_holds_the_most():
    # 8 GiB of fp32 weights and gradients, 16 GiB of AdamW moments... and 40 GiB persist, 74 GiB at the peak.
    # Activations (34 GiB) hold more than the optimizer here; with a 40 GiB optimizer state it is the optimizer.
    finding = memory_near_full(full_with_parts(parts(8, 8, 40, 58), peak_gib=74), CONFIG)

    assert finding.evidence["largest_part"] == "optimizer"
    assert finding.action.startswith("The largest part of this process's 76.5GiB on GPU 0 is optimizer state: 40.0")
    assert "AdamW8bit" in finding.action and "saves about 30.0GiB" in finding.action  # 3/4 of fp32 moments
    assert "sharding the optimizer state over N ranks" in finding.action
    assert finding.evidence["optimizer_bytes"] == 40 * GIB


def test_sharding_counts_the_ranks_of_the_job():
    finding = memory_near_full(full_with_parts(parts(8, 8, 40, 58), world_size=8, peak_gib=74), CONFIG)
    assert (
        "over the job's 8 ranks (ZeRO-1: ZeroRedundancyOptimizer, or FSDP) keeps 1/8 of it on each GPU "
        "(saves about 35.0GiB)" in finding.action
    )


def test_memory_near_full_names_the_activations_and_what_halves_them():
    finding = memory_near_full(full_with_parts(parts(2, 2, 4, 8), autocast=False, peak_gib=74), CONFIG)

    assert finding.evidence["largest_part"] == "activations"
    assert finding.evidence["activations_bytes"] == 66 * GIB
    assert "torch.utils.checkpoint" in finding.action
    assert "bf16 autocast" in finding.action and "saves about 33.0GiB" in finding.action
    assert finding.suggest == {"batch_size": 32, "gradient_accumulation_steps": 2}


def test_no_autocast_advice_for_a_job_already_in_bf16():
    finding = memory_near_full(full_with_parts(parts(2, 2, 4, 8, "bfloat16"), autocast=False, peak_gib=74), CONFIG)
    assert "autocast" not in finding.action


def test_memory_near_full_names_the_cache_and_expandable_segments():
    finding = memory_near_full(full_with_parts(parts(2, 2, 4, 9), peak_gib=20, reserved_gib=76), CONFIG)

    assert finding.evidence["largest_part"] == "cache"
    assert finding.suggest == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
