"""Energy per step and MFU end to end: a live process the fake driver lists on an H100 whose energy counter moves,
its probe report (constructed, with the step's anatomy), and the snapshots the sampler makes of them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop.collect.sampler import SnapshotMaker
from gputop.collect.step_cost import ENERGY_SPAN_S
from gputop.collect.training import TrainingCollector
from gputop.document import snapshot_to_dict
from gputop.model import TrainingView
from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import GIB, h100
from tests.training.conftest import report_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

POWER_W = 400.0
STEPS_PER_S = 50.0
STEP = {
    "boundary": "DataLoader",
    "clock": "cuda",
    "steps": 5000,
    "window_s": 10.0,
    "window_steps": 500,
    "step_s": 0.02,
    "steps_per_s": STEPS_PER_S,
    "samples_per_s": 1600.0,
    "phases_s": {"data": 0.001, "forward": 0.006, "backward": 0.01, "optimizer": 0.003},
    "flops_per_step": 2e12,
    "flops_source": "counted",
}
MATH = {"autocast": True, "parameter_dtypes": ["float32"], "float32_matmul_precision": "highest"}


def write_report(probe_dir: Path, pid: int) -> None:
    (probe_dir / f"{pid}.json").write_text(json.dumps(report_for(pid, step=STEP, **MATH)))


def state(pid: int, energy_mj: int, **gpu: object) -> FakeState:
    process = FakeProcess(pid=pid, used_memory=GIB)
    return FakeState(gpus=[h100(0, processes=[process], energy_mj=energy_mj, **gpu)])


def view_of(maker: SnapshotMaker, pid: int) -> tuple[dict, TrainingView]:
    snap = maker.snapshot(force_slow=True)
    view = snap.training_view(pid)
    assert view is not None
    return snapshot_to_dict(snap), view


@pytest.fixture
def maker(probe_dir: Path, spawn):
    job = spawn()
    maker = SnapshotMaker(focus_pid=job.pid, training=TrainingCollector(probe_dir=str(probe_dir)))
    yield maker, job.pid
    maker.close()


def test_energy_per_step_and_mfu_of_a_job_alone_on_its_gpu(fake_driver, probe_dir: Path, maker) -> None:
    maker, pid = maker
    started = time.time()
    driver = fake_driver(state(pid, 0))
    maker.start()
    deadline = time.monotonic() + 60
    while True:
        # The counter moves as a GPU drawing POWER_W would move it; the report is rewritten, as the probe does.
        driver.write(state(pid, int((time.time() - started) * POWER_W * 1000)))
        write_report(probe_dir, pid)
        document, view = view_of(maker, pid)
        if view.cost is not None and view.cost.energy_per_step_j is not None:
            break
        assert time.monotonic() < deadline, view.cost
        time.sleep(0.5)

    cost = view.cost
    assert time.time() - started >= ENERGY_SPAN_S
    assert cost.power_w == pytest.approx(POWER_W, rel=0.1)
    assert cost.energy_per_step_j == pytest.approx(POWER_W / STEPS_PER_S, rel=0.1)
    assert (cost.achieved_tflops, cost.precision, cost.peak_tflops) == (100.0, "bf16", 989.5)
    assert cost.mfu == pytest.approx(100.0 / 989.5, abs=1e-4)
    (gpu,) = document["gpus"]
    assert gpu["energy_j"] > 0
    (training,) = [t for t in document["training"] if t["pid"] == pid]
    assert training["cost"]["mfu"] == cost.mfu
    assert training["probe"]["step"]["phases_s"][0] == ["data", 0.001]


def test_a_gpu_another_process_shares_has_mfu_but_no_energy_per_step(fake_driver, probe_dir, maker, spawn) -> None:
    maker, pid = maker
    other = spawn()
    shared = state(pid, 1000)
    shared.gpus[0].processes.append(FakeProcess(pid=other.pid, used_memory=GIB))
    fake_driver(shared)
    write_report(probe_dir, pid)
    maker.start()

    _, view = view_of(maker, pid)

    assert view.cost is not None and view.cost.energy_per_step_j is None
    assert view.cost.unavailable["energy_per_step_j"].startswith(f"GPU 0 is shared with PID {other.pid}")
    assert view.cost.mfu == pytest.approx(0.1011, abs=1e-4)


def test_a_gpu_older_than_volta_has_no_energy_per_step(fake_driver, probe_dir: Path, maker) -> None:
    maker, pid = maker
    fake_driver(state(pid, 1000, architecture=4, name="Tesla P100-PCIE-16GB"))
    write_report(probe_dir, pid)
    maker.start()

    _, view = view_of(maker, pid)

    assert view.cost is not None
    assert view.cost.unavailable["energy_per_step_j"] == "GPU 0: unsupported"
    assert view.cost.unavailable["mfu"] == "no peak known for Tesla P100-PCIE-16GB"
    assert view.cost.achieved_tflops == 100.0


def test_gputop_once_json_carries_the_step_its_cost_and_the_energy_counter(tmp_path: Path, probe_dir: Path, spawn):
    job = spawn()
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(state(job.pid, 15_636_002))
    write_report(probe_dir, job.pid)

    run = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"],
        env={**driver.env(), "GPUTOP_PROBE_DIR": str(probe_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["gpus"][0]["energy_j"] == 15636.002
    (view,) = [v for v in document["training"] if v["pid"] == job.pid]
    assert view["probe"]["step"]["steps_per_s"] == STEPS_PER_S
    assert view["probe"]["step"]["phases_s"] == [
        ["data", 0.001],
        ["forward", 0.006],
        ["backward", 0.01],
        ["optimizer", 0.003],
    ]
    cost = view["cost"]
    assert (cost["achieved_tflops"], cost["precision"], cost["peak_tflops"]) == (100.0, "bf16", 989.5)
    # One reading of the counter in --once's 0.12 s: energy per step needs seconds.
    assert (cost["energy_per_step_j"], cost["unavailable"]["energy_per_step_j"]) == (None, "measuring")
