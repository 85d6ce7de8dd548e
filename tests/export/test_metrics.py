"""The snapshot → Prometheus mapping, with plain model values (no driver, no subprocess)."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputop.export.collector import SnapshotCollector
from gputop.model import (
    DRIVER_OK,
    DRIVER_UNAVAILABLE,
    GPU_LOST_STATE,
    PROBE_OK,
    THROTTLE_REASONS,
    UNSUPPORTED,
    Container,
    CudaMemory,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostProcess,
    LoaderView,
    ProbeReport,
    Snapshot,
    StepAnatomy,
    StepCost,
    TensorMemory,
    TrainingView,
)
from tests.export.scrape import names, parse, value
from tests.factories import host_info

GIB = 1024**3
UUID = "GPU-6a1b2c3d-0000-4000-8000-000000000000"
NAME = "NVIDIA H100 80GB HBM3"

HOST = host_info(per_core=(75.0, 0.0), usable_cores=1, load_average=(1.5, 1.25, 0.5), used_gib=24, swap_gib=8)
DRIVER = DriverInfo(DRIVER_OK, driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550.90.07")
GPU = Gpu(
    index=0,
    uuid=UUID,
    name=NAME,
    memory_total_bytes=80 * GIB,
    memory_used_bytes=20 * GIB,
    memory_free_bytes=59 * GIB,
    memory_reserved_bytes=GIB,
    utilization_gpu_percent=87,
    utilization_memory_percent=41,
    sm_activity_percent=63.5,
    temperature_c=61,
    power_w=512.345,
    power_limit_w=700,
    fan_percent=None,
    pstate=0,
    clock_sm_mhz=1755,
    clock_mem_mhz=2619,
    clock_sm_max_mhz=1980,
    clock_mem_max_mhz=2619,
    pcie_rx_bytes_per_s=48_000 * 1024,
    pcie_tx_bytes_per_s=1_200 * 1024,
    throttle_reasons=("sw_power_cap",),
    ecc_uncorrected_volatile=0,
    unavailable={"fan_percent": UNSUPPORTED},
)
PROCESS = GpuProcess(
    pid=4242,
    gpu_index=0,
    kind="compute",
    gpu_memory_bytes=6 * GIB,
    sm_percent=50,
    memory_bandwidth_percent=20,
    host=HostProcess(
        pid=4242,
        user="ada",
        name="python",
        command="python train.py --token=hunter2",
        cpu_percent=98.0,
        rss_bytes=3 * GIB,
        start_time=1_700_000_000.0,
        status="running",
    ),
)
NOW = 1_800_000_000.0


def snapshot(**changes: object) -> Snapshot:
    base = Snapshot(time=NOW - 0.25, host=HOST, driver=DRIVER, gpus=(GPU,), processes=(PROCESS,))
    return replace(base, **changes)


def exposition(snap: Snapshot | None, per_process: bool = False, report_age: bool = True) -> str:
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: snap, per_process, report_age, clock=lambda: NOW))
    return generate_latest(registry).decode()


def scrape(snap: Snapshot | None, per_process: bool = False) -> list:
    return parse(exposition(snap, per_process))


def test_gpu_values_are_in_base_units_with_gpu_uuid_and_name_labels():
    samples = scrape(snapshot())

    gpu = {"gpu": "0", "uuid": UUID, "name": NAME}
    assert value(samples, "gputop_gpu_up", **gpu) == 1
    assert value(samples, "gputop_gpu_memory_total_bytes", **gpu) == 80 * GIB
    assert value(samples, "gputop_gpu_memory_used_bytes", **gpu) == 20 * GIB
    assert value(samples, "gputop_gpu_memory_free_bytes", **gpu) == 59 * GIB
    assert value(samples, "gputop_gpu_memory_reserved_bytes", **gpu) == GIB
    assert value(samples, "gputop_gpu_temperature_celsius", **gpu) == 61
    assert value(samples, "gputop_gpu_power_watts", **gpu) == 512.345
    assert value(samples, "gputop_gpu_power_limit_watts", **gpu) == 700
    assert value(samples, "gputop_gpu_performance_state", **gpu) == 0
    assert value(samples, "gputop_gpu_sm_clock_hertz", **gpu) == 1_755_000_000
    assert value(samples, "gputop_gpu_memory_clock_max_hertz", **gpu) == 2_619_000_000


def test_percentages_become_ratios_from_0_to_1():
    samples = scrape(snapshot())

    assert value(samples, "gputop_gpu_busy_ratio") == 0.87
    assert value(samples, "gputop_gpu_memory_busy_ratio") == 0.41
    assert value(samples, "gputop_gpu_sm_activity_ratio") == 0.635
    assert value(samples, "gputop_host_cpu_busy_ratio") == 0.375


def test_gpm_profiling_metrics_are_one_family_each_ratios_for_shares():
    gpu = replace(
        GPU,
        sm_occupancy_percent=9.0,
        tensor_activity_percent=2.5,
        dram_bandwidth_percent=11.0,
        fp32_activity_percent=0.0,
        gpm_pcie_rx_bytes_per_s=1_048_576,
    )
    samples = scrape(snapshot(gpus=(gpu,)))

    assert value(samples, "gputop_gpu_sm_occupancy_ratio", gpu="0") == 0.09
    assert value(samples, "gputop_gpu_tensor_activity_ratio", gpu="0") == 0.025
    assert value(samples, "gputop_gpu_dram_bandwidth_ratio", gpu="0") == 0.11
    assert value(samples, "gputop_gpu_fp32_activity_ratio", gpu="0") == 0
    assert value(samples, "gputop_gpu_gpm_pcie_rx_bytes_per_second", gpu="0") == 1_048_576
    assert not names(samples) & {"gputop_gpu_fp64_activity_ratio", "gputop_gpu_nvlink_rx_bytes_per_second"}


def test_pcie_throughput_is_one_series_per_direction():
    samples = scrape(snapshot())

    assert value(samples, "gputop_gpu_pcie_bytes_per_second", direction="rx") == 48_000 * 1024
    assert value(samples, "gputop_gpu_pcie_bytes_per_second", direction="tx") == 1_200 * 1024


def test_every_throttle_reason_is_a_0_or_1_gauge():
    samples = scrape(snapshot())

    reasons = {s.labels["reason"]: s.value for s in samples if s.name == "gputop_gpu_throttle_reason"}
    assert reasons == {reason: float(reason == "sw_power_cap") for reason in THROTTLE_REASONS}
    assert "hw_thermal_slowdown" in reasons


def test_unknown_throttle_reasons_give_no_series():
    samples = scrape(snapshot(gpus=(replace(GPU, throttle_reasons=None),)))

    assert "gputop_gpu_throttle_reason" not in names(samples)


def test_a_value_that_could_not_be_read_is_absent_not_zero():
    samples = scrape(snapshot())

    assert "gputop_gpu_fan_speed_ratio" not in names(samples)
    assert "gputop_gpu_fan_speed_ratio" not in exposition(snapshot())


def test_a_measured_zero_stays_zero():
    samples = scrape(snapshot(gpus=(replace(GPU, utilization_gpu_percent=0, power_w=0.0),)))

    assert value(samples, "gputop_gpu_busy_ratio") == 0
    assert value(samples, "gputop_gpu_power_watts") == 0
    assert value(samples, "gputop_gpu_ecc_uncorrected_errors_total") == 0
    assert value(samples, "gputop_host_swap_used_bytes") == 0


def test_ecc_errors_are_a_counter_with_total_suffix():
    text = exposition(snapshot(gpus=(replace(GPU, ecc_uncorrected_volatile=3),)))

    assert "# TYPE gputop_gpu_ecc_uncorrected_errors_total counter" in text
    assert value(parse(text), "gputop_gpu_ecc_uncorrected_errors_total", gpu="0") == 3


def test_a_lost_gpu_is_up_0_with_no_other_series():
    lost = Gpu(index=1, uuid="GPU-lost", name=NAME, state=GPU_LOST_STATE, reason="GPU is lost: reset it")
    samples = scrape(snapshot(gpus=(GPU, lost)))

    assert value(samples, "gputop_gpu_up", gpu="1", uuid="GPU-lost", name=NAME) == 0
    assert value(samples, "gputop_gpu_up", gpu="0") == 1
    assert [s.name for s in samples if s.labels.get("gpu") == "1"] == ["gputop_gpu_up"]


def test_a_gpu_whose_uuid_and_name_are_unknown_keeps_its_index_label():
    lost = Gpu(index=3, uuid=None, name=None, state=GPU_LOST_STATE, reason="GPU is lost")
    samples = scrape(snapshot(gpus=(lost,)))

    [up] = [s for s in samples if s.name == "gputop_gpu_up"]
    assert (up.labels["gpu"], up.value) == ("3", 0)


def test_driver_versions_are_an_info_metric():
    samples = scrape(snapshot())

    [info] = [s for s in samples if s.name == "gputop_driver_info"]
    assert info.labels == {"driver_version": "550.90.07", "cuda_version": "12.4", "nvml_version": "12.550.90.07"}
    assert info.value == 1
    assert value(samples, "gputop_driver_up") == 1


def test_without_a_driver_only_host_and_driver_up_0_remain():
    driver = DriverInfo(DRIVER_UNAVAILABLE, reason="NVIDIA driver library libnvidia-ml.so.1 not found")
    samples = scrape(snapshot(driver=driver, gpus=(), processes=()))

    assert value(samples, "gputop_driver_up") == 0
    assert not {n for n in names(samples) if n.startswith(("gputop_gpu_", "gputop_driver_info"))}
    assert value(samples, "gputop_host_memory_total_bytes") == 64 * GIB


def test_host_cpu_memory_and_load():
    samples = scrape(snapshot())

    assert value(samples, "gputop_host_cpus") == 2
    assert value(samples, "gputop_host_usable_cpus") == 1
    assert (value(samples, "gputop_host_load1"), value(samples, "gputop_host_load15")) == (1.5, 0.5)
    assert value(samples, "gputop_host_memory_used_bytes") == 24 * GIB
    assert value(samples, "gputop_host_memory_available_bytes") == 40 * GIB
    assert value(samples, "gputop_host_swap_total_bytes") == 8 * GIB


def test_unknown_host_cpu_and_load_are_absent():
    samples = scrape(snapshot(host=replace(HOST, cpu_percent=None, load_average=None)))

    assert not names(samples) & {"gputop_host_cpu_busy_ratio", "gputop_host_load1", "gputop_host_load5"}


def test_no_process_series_by_default():
    samples = scrape(snapshot())

    assert not {n for n in names(samples) if n.startswith("gputop_process_")}
    assert "4242" not in exposition(snapshot())


def test_per_process_series_are_labelled_by_gpu_pid_and_container_only():
    samples = scrape(snapshot(), per_process=True)

    process_samples = [s for s in samples if s.name.startswith("gputop_process_")]
    assert {frozenset(s.labels) for s in process_samples} == {frozenset({"gpu", "pid", "container"})}
    assert value(samples, "gputop_process_gpu_memory_bytes", gpu="0", pid="4242") == 6 * GIB
    assert value(samples, "gputop_process_sm_ratio", pid="4242") == 0.5
    assert value(samples, "gputop_process_memory_busy_ratio", pid="4242") == 0.2
    assert value(samples, "gputop_process_start_time_seconds", pid="4242") == 1_700_000_000


def in_container(container: Container) -> Snapshot:
    assert PROCESS.host is not None
    return snapshot(processes=(replace(PROCESS, host=replace(PROCESS.host, container=container)),))


def test_a_process_in_a_container_carries_it_as_a_label_per_process():
    docker = Container("docker", "/docker/" + "ab" * 32, id="ab" * 32)
    samples = scrape(in_container(docker), per_process=True)

    assert value(samples, "gputop_process_gpu_memory_bytes", pid="4242", container="docker abababababab") == 6 * GIB
    assert "abababababab" not in exposition(in_container(docker))


def test_a_process_in_no_container_or_only_a_systemd_unit_has_an_empty_container_label():
    for snap in (snapshot(), in_container(Container("systemd", "/system.slice/ada.service", name="ada.service"))):
        samples = scrape(snap, per_process=True)
        assert value(samples, "gputop_process_gpu_memory_bytes", pid="4242", container="") == 6 * GIB
        assert "ada.service" not in exposition(snap, per_process=True)


def test_no_command_line_user_or_process_name_even_per_process():
    text = exposition(snapshot(), per_process=True)

    for secret in ("hunter2", "train.py", '"ada"', '"python"', "trainer-01"):
        assert secret not in text


def test_sample_timestamp_and_age():
    samples = scrape(snapshot())

    assert value(samples, "gputop_last_sample_timestamp_seconds") == NOW - 0.25
    assert value(samples, "gputop_last_sample_age_seconds") == 0.25
    assert value(samples, "gputop_scrape_duration_seconds") >= 0


def test_a_textfile_has_no_age_that_would_read_fresh_forever():
    samples = parse(exposition(snapshot(), report_age=False))

    assert "gputop_last_sample_age_seconds" not in names(samples)
    assert value(samples, "gputop_last_sample_timestamp_seconds") == NOW - 0.25


def test_before_the_first_snapshot_only_the_scrape_duration_is_exported():
    assert names(scrape(None)) == {"gputop_scrape_duration_seconds"}


def test_the_memory_of_training_processes_is_one_series_per_gpu_and_part() -> None:
    def job(pid: int, weights: int) -> TrainingView:
        tensors = TensorMemory(
            "cuda:0",
            weights_bytes=weights,
            gradients_bytes=weights,
            optimizer_bytes=2 * weights,
            allocated_after_step_bytes=4 * weights,
        )
        stats = CudaMemory(
            device=0,
            gpu_index=0,
            allocated_peak_bytes=5 * weights,
            reserved_bytes=6 * weights,
            nvml_process_bytes=7 * weights,
        )
        cpu = TensorMemory("cpu", weights_bytes=100, gradients_bytes=100, optimizer_bytes=0)
        return TrainingView(pid, probe=ProbeReport(PROBE_OK, tensors=(tensors, cpu), cuda=(stats,)))

    snap = snapshot(training=(job(4242, GIB), job(4243, 2 * GIB)))
    samples = scrape(snap)

    assert value(samples, "gputop_torch_memory_bytes", gpu="0", part="optimizer") == 6 * GIB
    assert value(samples, "gputop_torch_memory_bytes", gpu="0", part="outside") == 3 * GIB
    assert value(samples, "gputop_torch_memory_bytes", gpu="cpu", part="weights") == 200
    assert value(samples, "gputop_torch_memory_bytes", gpu="cpu", part="cache") is None  # no allocator: no sample
    assert not [s for s in samples if s.name == "gputop_torch_memory_bytes" and "pid" in s.labels]

    per_process = scrape(snap, per_process=True)
    assert value(per_process, "gputop_torch_memory_bytes", gpu="0", part="activations", pid="4243") == 2 * GIB


def training_view(pid: int = 4242, gpu_index: int | None = 0, rank: int | None = 0, **step: object) -> TrainingView:
    """A training process whose probe reports a step, and what it costs."""
    anatomy = StepAnatomy(
        boundary="DataLoader",
        clock="cuda",
        steps_per_s=50.0,
        samples_per_s=1600.0,
        step_s=0.02,
        phases_s=(("data", 0.002), ("forward", 0.006), ("backward", 0.01), ("optimizer", 0.002)),
        **step,  # type: ignore[arg-type]
    )
    cuda = (CudaMemory(device=0, gpu_index=gpu_index),) if gpu_index is not None else ()
    loader = LoaderView(loader_id=1, data_wait_share=0.1, last_batch_age_s=0.1)
    probe = ProbeReport(PROBE_OK, rank=rank, step=anatomy, cuda=cuda, loaders=(loader,))
    cost = StepCost(energy_per_step_j=5.5, achieved_tflops=61.2, peak_tflops=989.5, precision="bf16", mfu=0.0618)
    return TrainingView(pid, probe=probe, cost=cost)


def test_a_training_step_is_exported_per_gpu_and_rank_in_base_units() -> None:
    samples = scrape(snapshot(training=(training_view(),)))

    labels = {"gpu": "0", "rank": "0"}
    assert value(samples, "gputop_training_steps_per_second", **labels) == 50.0
    assert value(samples, "gputop_training_samples_per_second", **labels) == 1600.0
    assert value(samples, "gputop_training_step_seconds", **labels) == 0.02
    assert value(samples, "gputop_training_data_wait_ratio", **labels) == 0.1
    assert value(samples, "gputop_training_achieved_flops_per_second", **labels) == 61.2e12
    assert value(samples, "gputop_training_mfu_ratio", **labels) == 0.0618
    assert value(samples, "gputop_training_energy_per_step_joules", **labels) == 5.5
    assert value(samples, "gputop_training_phase_seconds", phase="backward", **labels) == 0.01
    assert value(samples, "gputop_training_phase_seconds", phase="h2d", **labels) is None  # not seen: no sample


TIMED_LOADER = LoaderView(
    loader_id=1, data_wait_share=0.9, last_batch_age_s=0.1, worker_batch_s=0.0672, worker_batch_p95_s=0.25
)


def test_the_time_a_worker_takes_to_make_a_batch_is_exported_where_the_probe_timed_it() -> None:
    timed = replace(training_view(), probe=replace(training_view().probe, loaders=(TIMED_LOADER,)))

    samples = scrape(snapshot(training=(timed, training_view(4243, gpu_index=1, rank=1))))

    assert value(samples, "gputop_training_worker_batch_seconds", gpu="0", rank="0") == 0.0672
    assert value(samples, "gputop_training_worker_batch_seconds", gpu="1", rank="1") is None  # not timed: no sample
    assert value(samples, "gputop_training_worker_batch_p95_seconds", gpu="0", rank="0") == 0.25


def test_a_training_process_without_a_step_or_a_cost_value_has_no_such_series() -> None:
    unmeasured = replace(training_view(), cost=StepCost())
    no_step = TrainingView(4243, probe=ProbeReport(PROBE_OK))

    found = names(scrape(snapshot(training=(unmeasured, no_step))))

    assert "gputop_training_steps_per_second" in found
    assert not {"gputop_training_mfu_ratio", "gputop_training_energy_per_step_joules"} & found
    assert not [s for s in scrape(snapshot(training=(no_step,))) if s.name.startswith("gputop_training_")]


def test_a_cpu_job_and_a_job_without_a_launcher_are_labelled_so() -> None:
    samples = scrape(snapshot(training=(training_view(gpu_index=None, rank=None),)))

    assert value(samples, "gputop_training_steps_per_second", gpu="cpu", rank="") == 50.0


def test_training_series_carry_the_pid_only_per_process() -> None:
    views = (training_view(4242, rank=0), training_view(4243, gpu_index=1, rank=1))

    default = scrape(snapshot(training=views))
    per_process = scrape(snapshot(training=views), per_process=True)

    assert not [s for s in default if s.name.startswith("gputop_training_") and "pid" in s.labels]
    assert value(default, "gputop_training_mfu_ratio", gpu="1", rank="1") == 0.0618
    assert value(per_process, "gputop_training_steps_per_second", gpu="1", rank="1", pid="4243") == 50.0


def test_two_processes_with_the_same_gpu_and_rank_give_one_series_the_first() -> None:
    first, second = training_view(4242), replace(training_view(4243), cost=StepCost(mfu=0.5))

    samples = scrape(snapshot(training=(first, second)))

    assert [s.value for s in samples if s.name == "gputop_training_mfu_ratio"] == [0.0618]


def test_the_gpu_energy_counter_is_a_counter_in_joules() -> None:
    samples = scrape(snapshot(gpus=(replace(GPU, energy_j=15636.002),)))

    assert value(samples, "gputop_gpu_energy_joules_total", gpu="0", uuid=UUID, name=NAME) == 15636.002
    assert "# TYPE gputop_gpu_energy_joules_total counter" in exposition(snapshot(gpus=(replace(GPU, energy_j=1.0),)))


def test_a_gpu_without_an_energy_counter_has_no_energy_series() -> None:
    assert "gputop_gpu_energy_joules_total" not in names(scrape(snapshot()))
