"""The step anatomy of real CPU jobs under the probe: a model whose every phase takes a known time, measured by
the job itself as it sleeps, against what the probe reports in its ``"step"`` object."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.model import PHASES, StepAnatomy
from gputop.run.launch import probe_env
from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SCRIPT = SCRIPTS / "anatomy.py"
TOLERANCE = 0.10
SHARE_TOLERANCE = 0.03
"""The measured shares of the step hold to within a tenth of the true ones, or 3 % of the step where that is more:
the probe's statistics come from the steps it samples, a few of the job's, and on a loaded machine one late batch
moves a small share by more than a tenth of itself (data 15.6 % against 13.6 % in a run beside two other test
processes). A phase given to the wrong one moves its whole share, at least 10 % here."""


@dataclasses.dataclass
class Run:
    report: dict
    truth: dict[str, float]
    flops: int

    @property
    def step(self) -> dict:
        return self.report["step"]


def run_anatomy(directory: Path, *args: str) -> Run:
    """Run scripts/anatomy.py ARGS to its end under the probe; its last report, and what it measured itself."""
    directory.mkdir(mode=0o700)
    env = probe_env(dict(os.environ), str(directory), "test")
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    report = json.loads((directory / f"{json.loads(lines['pid'])}.json").read_text())
    return Run(report, json.loads(lines["truth"]), int(lines["flops"]))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_anatomy(tmp_path_factory.mktemp("plain") / "probe", "--steps", "30")


@pytest.fixture(scope="module")
def accumulating(tmp_path_factory: pytest.TempPathFactory) -> Run:
    args = ["--accumulate", "4", "--steps", "14", "--data-s", "0.01", "--forward-s", "0.02", "--backward-s", "0.03"]
    return run_anatomy(tmp_path_factory.mktemp("accumulating") / "probe", *args)


def shares(phases: dict[str, float]) -> dict[str, float]:
    total = sum(phases.values())
    return {phase: seconds / total for phase, seconds in phases.items()}


def true_shares(truth: dict[str, float], phases: list[str]) -> dict[str, float]:
    """Each phase's share of the step as the job measured both; ``other`` is the rest of the step (the job's sleep
    in it, and everything else its loop does)."""
    known = {phase: truth[phase] / truth["step"] for phase in phases if phase != "other"}
    return {**known, "other": 1 - sum(known.values())}


def test_each_phase_takes_its_true_share_of_the_step(plain):
    measured = shares(plain.step["phases_s"])

    assert list(measured) == ["data", "forward", "backward", "optimizer", "other"]
    for phase, share in true_shares(plain.truth, list(measured)).items():
        assert measured[phase] == pytest.approx(share, rel=TOLERANCE, abs=SHARE_TOLERANCE), phase


def test_the_phases_add_up_to_the_mean_step(plain):
    step = plain.step

    assert list(step["phases_s"]) == [phase for phase in PHASES if phase in step["phases_s"]]
    assert sum(step["phases_s"].values()) == pytest.approx(step["window_s"] / step["window_steps"], rel=1e-9)
    assert step["step_s"] == pytest.approx(plain.truth["step"], rel=TOLERANCE)


def test_the_window_leaves_the_warm_up_out(plain):
    step = plain.step

    # 30 batches make 29 steps (the last is never closed by a next request): 5 of warm-up, the one whose FLOPs
    # were counted (slowed down by the counter), and 23 in the window.
    assert (step["boundary"], step["clock"], step["steps"], step["window_steps"]) == ("DataLoader", "host", 29, 23)
    assert step["warmup_step_s"] > 0 and step["step_p95_s"] >= step["step_s"]
    assert step["samples_per_s"] == pytest.approx(step["steps_per_s"] * 8)


def test_flops_per_step_equal_torchs_own_count_of_the_same_step(plain):
    assert (plain.step["flops_per_step"], plain.step["flops_source"]) == (plain.flops, "counted")


def test_a_cpu_job_says_why_it_has_no_copies_to_the_gpu_and_no_syncs(plain):
    step = plain.step

    assert step["syncs_per_step"] is None and step["sync_sites"] == [] and step["h2d_bytes_per_step"] is None
    assert step["unavailable"]["syncs_per_step"].startswith("no CUDA in this process")
    assert step["unavailable"]["h2d_pageable_share"].startswith("no CUDA in this process")


def test_the_step_object_has_exactly_the_fields_of_step_anatomy(plain):
    assert set(plain.step) == {field.name for field in dataclasses.fields(StepAnatomy)}
    json.dumps(plain.report, allow_nan=False)


def test_each_loader_names_the_line_that_built_it(plain):
    line = next(n for n, text in enumerate(SCRIPT.read_text().splitlines(), 1) if "the line created_at names" in text)

    assert plain.report["loaders"][0]["created_at"] == f"{SCRIPT.relative_to(Path.cwd())}:{line}"


def test_with_gradient_accumulation_a_step_holds_the_batches_up_to_the_optimizer_step(accumulating):
    step, truth = accumulating.step, accumulating.truth

    # Until the first optimizer step each batch is a step (3, the 4th is closed by that step), then 13 of 4
    # batches: 14 optimizer steps, the last never closed by a next request. The warm-up takes in the first 5.
    assert step["steps"] == 3 + 13
    assert step["samples_per_s"] == pytest.approx(step["steps_per_s"] * 4 * 8)
    measured = shares(step["phases_s"])
    for phase, share in true_shares(truth, list(measured)).items():
        assert measured[phase] == pytest.approx(share, rel=TOLERANCE, abs=SHARE_TOLERANCE), phase


def test_a_rank_sleeping_in_its_compute_makes_the_other_rank_wait_in_collectives(tmp_path):
    # torchrun, 2 ranks on gloo, DDP: rank 1 sleeps 60 ms a step before its forward pass. Rank 0 waits for it in
    # DDP's gradient all-reduce, inside its backward pass: the probe counts that wait as collective, not backward.
    directory = tmp_path / "probe"
    directory.mkdir(mode=0o700)
    job = [sys.executable, "-W", "ignore", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    job += [str(SCRIPTS / "ddp.py"), "--seconds", "10", "--workers", "0", "--work", "4", "--sleep-rank", "1"]
    env = probe_env(dict(os.environ), str(directory), "test")
    done = subprocess.run(job, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [json.loads(path.read_text()) for path in directory.glob("*.json")]
    phases = {r["rank"]: r["step"]["phases_s"] for r in reports if r.get("step")}

    assert sorted(phases) == [0, 1]
    assert phases[0]["collective"] - phases[1]["collective"] == pytest.approx(0.060, abs=0.020)
    assert phases[1]["other"] - phases[0]["other"] == pytest.approx(0.060, abs=0.020)
    assert phases[0]["backward"] < 0.010


def test_a_dataloader_subclass_is_placed_where_the_job_builds_it_not_at_its_super_call():
    import torch.utils.data

    from gputop.probe import hooks
    from gputop.probe.loader import CREATED_ATTR

    original = torch.utils.data.DataLoader.__init__
    wrapped = hooks._wrap_loader_init(original, None)

    class Mine(torch.utils.data.DataLoader):
        def __init__(self, data: list[int]) -> None:
            super().__init__(data)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(torch.utils.data.DataLoader, "__init__", wrapped)
    try:
        loader = Mine([1, 2, 3])  # this line
        line = sys._getframe().f_lineno - 1
    finally:
        monkey.undo()

    assert getattr(loader, CREATED_ATTR) == f"{os.path.join('tests', 'training', 'test_step_anatomy.py')}:{line}"
