"""The advisor on real training jobs: each scenario's bottleneck raises its finding with the right change, and
nothing else; healthy jobs raise nothing.

The jobs train a small model on a real DataLoader on the CPU; where a scenario needs a GPU figure (busy, memory,
clock reasons) the fake NVML driver lists the job's real PID on a fake H100. Windows are 3 s instead of 20.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gputop.advisor import RULE_IDS
from gputop.advisor.thresholds import WARMUP_STEPS as WARMUP
from tests.scenarios.conftest import WINDOW_S, Outcome, Scenario, usable_cores

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GPU_STEP = ("--step-sleep-s", "0.3")
"""A step that sleeps, as a training loop waits for the GPU to finish its kernels; long enough that the few
milliseconds a worker may wait for a CPU among the other scenarios are no data wait to speak of."""


def gib(n: float) -> int:
    return int(n * 1024**3)


def starved_on_cpu_in_the_main_process(advice: dict[str, dict]) -> None:
    found = advice["loader-in-main-process"]
    cores = found["evidence"]["usable_cores_per_rank"]
    assert found["evidence"]["bottleneck"] == "cpu"
    assert found["suggest"] == {"num_workers": min(found["evidence"]["needed_workers"], max(1, cores - 1))}


def workers_beyond_the_cores(advice: dict[str, dict]) -> None:
    found = advice["data-starved"]
    assert found["evidence"]["bottleneck"] == "io"
    assert found["suggest"]["num_workers"] == found["evidence"]["needed_workers"] >= 5


def more_workers_cannot_help(advice: dict[str, dict]) -> None:
    found = advice["data-starved"]
    assert found["evidence"]["bottleneck"] == "cpu"
    assert found["suggest"] == {}
    assert "More workers cannot help" in found["action"]


def fewer_workers(advice: dict[str, dict]) -> None:
    found = advice["too-many-workers"]
    assert found["suggest"] == {"num_workers": max(1, found["evidence"]["usable_cores_per_rank"] - 1)}


def leak_in_host_memory(advice: dict[str, dict]) -> None:
    assert advice["memory-leak"]["evidence"]["measure"] == "the training process's RSS"


def direction_only(advice: dict[str, dict]) -> None:
    found = advice["batch-too-small"]
    assert found["suggest"] == {}
    assert "no CUDA memory" in found["action"]  # the probe runs, on a CPU-only torch


def stalled_on_a_lock(advice: dict[str, dict]) -> None:
    found = advice["gpu-idle"]
    assert "lock (futex)" in found["detail"]
    assert found["evidence"]["idle_s"] >= 8


def persistent(advice: dict[str, dict]) -> None:
    assert advice["persistent-workers-off"]["suggest"] == {"persistent_workers": True}


HEALTHY_GPU = {"util_gpu": 95, "gpm_sm_util": 80.0, "memory_used": gib(60), "process_gib": 58}
CORES = usable_cores()


def job(line: str) -> tuple[str, ...]:
    """``job.py`` arguments written as on a command line."""
    return tuple(line.split())


SCENARIOS = {
    s.name: s
    for s in (
        # Wave 1: the CPUs are the bottleneck on purpose.
        Scenario(
            "input-bound-main-process",
            job("--workers 0 --item-cpu-s 0.002 --batch-size 8"),
            raises=("loader-in-main-process",),
            check=starved_on_cpu_in_the_main_process,
            wave=1,
        ),
        Scenario(
            "cpu-bound-saturated-workers",
            job(f"--workers {CORES} --persistent --item-cpu-s 0.004 --batch-size 8"),
            raises=("data-starved",),
            check=more_workers_cannot_help,
            wave=1,
        ),
        Scenario(
            "too-many-workers",
            job(f"--workers {4 * CORES} --persistent --item-cpu-s 0.004 --batch-size 8"),
            raises=("too-many-workers",),
            may=("data-starved",),
            check=fewer_workers,
            wave=1,
        ),
        # Wave 2
        Scenario(
            "io-bound-workers",
            job("--workers 2 --persistent --item-sleep-s 0.005 --batch-size 8 --step-sleep-s 0.005"),
            raises=("data-starved",),
            check=workers_beyond_the_cores,
            watch="report",
        ),
        Scenario(
            "leaking-loop",
            # Memory is judged after the warm-up steps: on a busy host those can take most of the training time.
            job(f"--workers 0 --rows 64 --width 256 --batch-size 32 --leak --step-sleep-s 0.1 --warmup-steps {WARMUP}"),
            raises=("memory-leak",),
            # What it keeps makes some steps slower than the others, truly: the steps that fault in fresh pages, and
            # those where Python's full collection walks every kept tensor (a walk that grows with the leak).
            may=("step-variance",),
            check=leak_in_host_memory,
        ),
        Scenario(
            "under-filled-gpu",
            job("--workers 1 --persistent") + GPU_STEP,
            raises=("batch-too-small",),
            gpu={"util_gpu": 35, "gpm_sm_util": 20.0, "memory_used": gib(10), "process_gib": 9},
            check=direction_only,
        ),
        Scenario(
            "near-full-gpu",
            job("--workers 1 --persistent") + GPU_STEP,
            raises=("memory-near-full",),
            gpu={"util_gpu": 97, "gpm_sm_util": 85.0, "memory_used": gib(76), "process_gib": 75},
        ),
        Scenario(
            "stalled-job",
            job("--workers 1 --persistent --stall-after-s 1") + GPU_STEP,
            raises=("gpu-idle",),
            gpu={"util_gpu": 0, "gpm_sm_util": 0.0, "memory_used": gib(20), "process_gib": 19},
            check=stalled_on_a_lock,
            watch="report",
        ),
        # Waves 3 and 4
        Scenario(
            "workers-restarted-every-epoch",
            job("--workers 2 --epoch-batches 4 --batch-size 4 --worker-init-s 0.3") + GPU_STEP,
            raises=("persistent-workers-off",),
            check=persistent,
            wave=3,
        ),
        Scenario(
            "pageable-batches-on-a-gpu",
            job("--workers 2 --persistent --item-sleep-s 0.003 --batch-size 8 --step-sleep-s 0.01"),
            raises=("pin-memory-off", "data-starved"),
            gpu={"util_gpu": 45, "gpm_sm_util": 30.0, "memory_used": gib(50), "process_gib": 48},
            wave=3,
        ),
        Scenario(
            "cuda-in-a-worker",
            job("--workers 2 --persistent --cuda-in-worker") + GPU_STEP,
            raises=("cuda-in-worker",),
            gpu=HEALTHY_GPU,
            wave=4,
        ),
        Scenario(
            "thermally-throttled-gpu",
            job("--workers 1 --persistent") + GPU_STEP,
            raises=("throttling",),
            gpu={**HEALTHY_GPU, "clocks_event_reasons": 0x40, "clock_sm_mhz": 1100, "temperature_c": 91},
            wave=4,
        ),
        Scenario("healthy-cpu-job", job("--workers 1 --persistent") + GPU_STEP, wave=4),
        Scenario("healthy-gpu-job", job("--workers 2 --persistent --pin-memory") + GPU_STEP, gpu=HEALTHY_GPU, wave=3),
    )
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name: str, outcomes: dict[str, Outcome]) -> None:
    scenario, outcome = SCENARIOS[name], outcomes[name]
    assert outcome.document is not None, outcome.stderr[-3000:]
    found = outcome.advice
    shown = json.dumps(outcome.document["advice"], indent=1)[:4000]

    missing = set(scenario.raises) - set(found)
    unexpected = set(found) - set(scenario.raises) - set(scenario.may)
    assert not missing, f"{name} did not raise {missing}: {shown}"
    assert not unexpected, f"{name} raised {unexpected}: {shown}"
    assert set(found) <= set(RULE_IDS)
    if scenario.check is not None:
        scenario.check(found)


RUN_SCENARIOS = [name for name, scenario in SCENARIOS.items() if scenario.watch == "run"]


@pytest.mark.parametrize("name", RUN_SCENARIOS)
def test_report_over_the_recording_says_what_the_live_advisor_said(name: str, outcomes: dict[str, Outcome]) -> None:
    """``gputop report FILE`` over ``gputop run --record``'s file gives the live run's findings, field for field:
    the advisor takes its times from the snapshots, so the same snapshots give the same findings."""
    outcome = outcomes[name]
    assert outcome.document is not None and outcome.recording is not None, outcome.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "report", str(outcome.recording), "--json", "--window", str(WINDOW_S)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert report["pid"] == outcome.document["pid"]
    assert report["recording"]["ended"] is not None and report["recording"]["damage"] is None
    live = outcome.document["advice"]
    replayed = [{k: v for k, v in a.items() if k not in ("held", "held_s")} for a in report["advice"]]
    assert replayed == live
    for finding in report["advice"]:
        assert finding["held"][-1]["from"] == finding["since"], "the last span starts when the finding was raised"
        assert finding["active"] == (finding["held"][-1]["to"] is None)
