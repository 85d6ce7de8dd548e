"""What a job's steps cost: energy per step and per sample from the energy counter over the GPUs the process uses,
achieved TFLOP/s and MFU against the peak of the precision in use; None with a reason where it cannot be had."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gputop.collect.step_cost import ENERGY_SPAN_S, EnergyHistory, precision_of, step_cost
from gputop.model import (
    MEASURING,
    MIG_ENABLED,
    PROBE_OK,
    UNSUPPORTED,
    CudaMemory,
    Gpu,
    GpuProcess,
    ProbeReport,
    StepAnatomy,
    StepCost,
    frozen_reasons,
)

pytestmark = pytest.mark.fast

PID = 4242
T0 = 1_800_000_000.0
STEP = StepAnatomy(boundary="DataLoader", clock="cuda", steps_per_s=50.0, samples_per_s=1600.0, flops_per_step=1.224e12)
PROBE = ProbeReport(
    PROBE_OK, step=STEP, autocast=True, parameter_dtypes=("float32",), float32_matmul_precision="highest"
)


def gpu(index: int = 0, energy_j: float | None = 1000.0, name: str = "NVIDIA H100 80GB HBM3", **values) -> Gpu:
    return Gpu(index=index, uuid=f"GPU-{index}", name=name, energy_j=energy_j, **values)


def on(index: int, pid: int = PID) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_index=index, kind="compute")


def history(*readings: tuple[float, list[Gpu]]) -> EnergyHistory:
    energy = EnergyHistory()
    for at, gpus in readings:
        energy.add(at, gpus)
    return energy


def cost(
    probe: ProbeReport = PROBE,
    gpus: list[Gpu] | None = None,
    processes: list[GpuProcess] | None = None,
    energy: EnergyHistory | None = None,
) -> StepCost:
    gpus = [gpu()] if gpus is None else gpus
    processes = [on(0)] if processes is None else processes
    energy = energy or history((T0, [gpu(energy_j=1000.0)]), (T0 + 10, [gpu(energy_j=3590.0)]))
    result = step_cost(PID, {PID}, probe, gpus, processes, energy)
    assert result is not None
    return result


def test_energy_per_step_is_the_gpus_mean_power_over_the_steps_per_second() -> None:
    result = cost()

    assert result.power_w == 259.0  # 2590 J over 10 s
    assert result.energy_per_step_j == pytest.approx(259.0 / 50)
    assert result.energy_per_sample_j == pytest.approx(259.0 / 1600)


def test_the_energy_of_every_gpu_the_process_uses_is_summed() -> None:
    gpus = [gpu(0), gpu(1)]
    energy = history(
        (T0, [gpu(0, energy_j=0.0), gpu(1, energy_j=0.0)]), (T0 + 8, [gpu(0, energy_j=800.0), gpu(1, energy_j=1600.0)])
    )

    result = cost(gpus=gpus, processes=[on(0), on(1)], energy=energy)

    assert result.power_w == 300.0


def test_the_gpus_the_probe_joined_count_where_nvml_does_not_list_the_process() -> None:
    probe = dataclasses.replace(PROBE, cuda=(CudaMemory(device=0, gpu_index=0),))

    assert cost(probe=probe, processes=[]).power_w == 259.0


def test_energy_is_measured_over_at_least_a_few_seconds() -> None:
    energy = history((T0, [gpu(energy_j=1000.0)]), (T0 + ENERGY_SPAN_S - 0.5, [gpu(energy_j=2000.0)]))

    result = cost(energy=energy)

    assert (result.energy_per_step_j, result.unavailable["energy_per_step_j"]) == (None, MEASURING)
    assert result.mfu is not None  # the FLOPs side does not wait for it


def test_readings_older_than_the_window_are_dropped() -> None:
    energy = history(
        (T0, [gpu(energy_j=0.0)]), (T0 + 25, [gpu(energy_j=10_000.0)]), (T0 + 40, [gpu(energy_j=13_000.0)])
    )

    assert cost(energy=energy).power_w == 200.0  # from T0 + 25: T0 is over 30 s before the newest


def test_a_gpu_shared_with_another_process_has_no_energy_per_step_but_mfu() -> None:
    result = cost(processes=[on(0), on(0, pid=777)])

    assert (result.energy_per_step_j, result.power_w) == (None, None)
    reason = result.unavailable["energy_per_step_j"]
    assert reason == "GPU 0 is shared with PID 777: its counter is not this job's alone"
    assert result.mfu is not None


def test_the_jobs_own_workers_on_its_gpu_do_not_make_it_shared() -> None:
    result = step_cost(PID, {PID, 4300}, PROBE, [gpu()], [on(0), on(0, pid=4300)], history())

    assert result is not None and result.unavailable["energy_per_step_j"] == MEASURING


def test_a_gpu_without_the_counter_gives_its_reason() -> None:
    old = gpu(energy_j=None, unavailable=frozen_reasons({"energy_j": UNSUPPORTED}))

    result = cost(gpus=[old])

    assert result.unavailable["energy_per_step_j"] == "GPU 0: unsupported"


def test_a_gpu_split_into_mig_instances_has_no_energy_per_step() -> None:
    result = cost(gpus=[gpu(mig_mode=MIG_ENABLED)])

    assert result.energy_per_step_j is None
    assert "MIG" in result.unavailable["energy_per_step_j"]


def test_a_counter_that_went_back_gives_no_power() -> None:
    energy = history((T0, [gpu(energy_j=5000.0)]), (T0 + 10, [gpu(energy_j=10.0)]))

    assert "went back" in cost(energy=energy).unavailable["power_w"]


def test_energy_per_sample_needs_samples_per_second() -> None:
    probe = dataclasses.replace(PROBE, step=dataclasses.replace(STEP, samples_per_s=None))

    result = cost(probe=probe)

    assert result.energy_per_step_j is not None and result.energy_per_sample_j is None
    assert "samples per second" in result.unavailable["energy_per_sample_j"]


def test_achieved_tflops_is_flops_per_step_times_steps_per_second_and_mfu_its_share_of_the_peak() -> None:
    result = cost()

    assert result.achieved_tflops == pytest.approx(61.2)  # 1.224e12 FLOP x 50 steps/s
    assert (result.precision, result.peak_tflops) == ("bf16", 989.5)
    assert result.mfu == pytest.approx(61.2 / 989.5, abs=1e-4)
    assert result.peak_source is not None and "H100" in result.peak_source


def test_an_unknown_gpu_model_has_achieved_tflops_but_no_mfu() -> None:
    result = cost(gpus=[gpu(name="NVIDIA Future X1")])

    assert result.achieved_tflops == pytest.approx(61.2)
    assert (result.mfu, result.peak_tflops) == (None, None)
    assert result.unavailable["mfu"] == "no peak known for NVIDIA Future X1"


def test_no_flop_count_gives_the_probes_reason() -> None:
    step = dataclasses.replace(STEP, flops_per_step=None, unavailable=frozen_reasons({"flops_per_step": "no counter"}))

    result = cost(probe=dataclasses.replace(PROBE, step=step))

    assert (result.achieved_tflops, result.mfu) == (None, None)
    assert result.unavailable["mfu"] == result.unavailable["achieved_tflops"] == "no counter"


def test_the_peak_of_several_gpus_is_their_sum() -> None:
    result = cost(gpus=[gpu(0), gpu(1)], processes=[on(0), on(1)])

    assert result.peak_tflops == 2 * 989.5


def test_autocast_on_a_gpu_without_bf16_is_measured_against_fp16() -> None:
    result = cost(gpus=[gpu(name="Tesla V100-SXM2-16GB")])

    assert (result.precision, result.peak_tflops) == ("fp16", 125.0)


def test_tf32_on_a_gpu_without_tf32_has_no_mfu_and_says_why() -> None:
    probe = dataclasses.replace(PROBE, autocast=False, float32_matmul_precision="high")

    result = cost(probe=probe, gpus=[gpu(name="Tesla T4")])

    assert (result.precision, result.mfu) == ("tf32", None)
    assert result.unavailable["mfu"] == "the T4 has no tf32 figure: no tensor cores for it"


def test_a_view_without_a_step_has_no_cost() -> None:
    assert step_cost(PID, {PID}, dataclasses.replace(PROBE, step=None), [gpu()], [on(0)], history()) is None


def test_a_cpu_job_has_a_cost_of_reasons() -> None:
    result = cost(gpus=[], processes=[])

    assert (result.energy_per_step_j, result.mfu) == (None, None)
    assert result.unavailable["mfu"] == "the process uses no GPU NVML lists"


def test_a_job_whose_math_runs_on_the_cpu_has_no_mfu_against_its_gpu() -> None:
    # NVML lists the process on the GPU, but CUDA is not initialised in it: its FLOPs are the CPU's.
    step = dataclasses.replace(STEP, clock="host")
    probe = dataclasses.replace(PROBE, step=step, cuda=(), cuda_reason="CUDA not initialised in this process")

    result = cost(probe)

    assert (result.mfu, result.peak_tflops) == (None, None)
    assert result.unavailable["mfu"] == "its math runs on the CPU (CUDA not initialised in this process)"
    assert result.achieved_tflops == pytest.approx(61.2)


def test_an_mfu_beyond_any_measurement_is_no_value() -> None:
    step = dataclasses.replace(STEP, flops_per_step=1e15)  # 50,000 TFLOP/s on a 989.5 peak: a wrong count

    result = cost(probe=dataclasses.replace(PROBE, step=step))

    assert result.mfu is None and result.unavailable["mfu"] == "invalid value from the driver"


@pytest.mark.parametrize(
    ("autocast", "dtypes", "matmul", "precision"),
    [
        (True, ("float32",), "highest", "bf16"),
        (False, ("bfloat16",), None, "bf16"),
        (False, ("float16", "float32"), "highest", "fp16"),
        (False, ("float32",), "high", "tf32"),
        (False, ("float32",), "medium", "tf32"),
        (False, ("float32",), "highest", "fp32"),
        (None, ("float32",), None, None),
        (False, None, "high", None),
    ],
)
def test_the_precision_in_use(autocast, dtypes, matmul, precision) -> None:
    probe = ProbeReport(PROBE_OK, autocast=autocast, parameter_dtypes=dtypes, float32_matmul_precision=matmul)

    found, why = precision_of(probe)

    assert found == precision
    assert (why is None) == (precision is not None)


REAL_TRACE = Path(__file__).resolve().parents[1] / "data" / "captures" / "h100-80gb-hbm3-energy-bf16-matmul.json"


def test_a_real_h100_trace_gives_the_energy_per_step_read_by_hand_over_the_same_seconds() -> None:
    """A bf16 matmul loop on a real H100, its energy counter read every 2 s as the slow cadence reads it: gputop's
    energy per step (mean power over the loop's rate in its last 10 s) is the counter's difference over the matmuls
    done between the same two readings, to 2 %; MFU is the loop's FLOP/s over the H100 SXM's 989.5."""
    trace = json.loads(REAL_TRACE.read_text())
    rows, energy, ticks = trace["rows"], EnergyHistory(), []
    for at, energy_mj, done, _ in rows:
        if not ticks or at - ticks[-1][0] >= 2.0:
            energy.add(at, [gpu(energy_j=energy_mj / 1000, name=trace["name"])])
            ticks.append((at, energy_mj, done))
    last = rows[-1][0]
    window = [row for row in rows if row[0] >= last - 10]
    rate = (window[-1][2] - window[0][2]) / (window[-1][0] - window[0][0])
    step = dataclasses.replace(
        STEP, steps_per_s=rate, samples_per_s=None, flops_per_step=float(trace["flops_per_step"])
    )
    probe = dataclasses.replace(PROBE, step=step, autocast=False, parameter_dtypes=("bfloat16",))

    result = step_cost(PID, {PID}, probe, [gpu(name=trace["name"])], [on(0)], energy)

    (_, first_mj, first_done), (_, last_mj, last_done) = ticks[0], ticks[-1]
    assert result is not None and result.energy_per_step_j is not None
    assert result.energy_per_step_j == pytest.approx((last_mj - first_mj) / 1000 / (last_done - first_done), rel=0.02)
    assert result.mfu == pytest.approx(trace["flops_per_step"] * rate / 1e12 / 989.5, abs=1e-4)
