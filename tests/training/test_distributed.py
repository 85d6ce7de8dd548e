"""Real torchrun jobs on the CPU (gloo), each rank with real DataLoader workers, watched by `gputop run`: the job
rules fire on the rank or node they are about and stay silent on a healthy job, and findings that hold on every
rank come once for the job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

WINDOW_S = 5
CORES = len(os.sched_getaffinity(0))


def torchrun(
    tmp_path: Path, probe_dir: Path, ranks: int, *args: str, seconds: float = 16, window: float = WINDOW_S
) -> dict:
    """`gputop run --headless` over `torchrun --standalone` with ``ranks`` ranks of scripts/ddp.py; the report."""
    report = tmp_path / "report.json"
    job = [sys.executable, "-W", "ignore", "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    job += [str(SCRIPTS / "ddp.py"), "--seconds", str(seconds), *args]
    argv = [sys.executable, "-m", "gputop", "run", "--headless", "--window", str(window)]
    argv += ["--report-json", str(report), "--", *job]
    env = {**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 90, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(report.read_text())


def ranks_of(doc: dict) -> dict[int, int]:
    """PID → rank of the job's ranks, from their launch variables."""
    return {v["pid"]: v["launch"]["rank"] for v in doc["training"] if v.get("launch") and v["role"] == "training"}


def found(doc: dict, rule: str) -> list[dict]:
    return [a for a in doc["advice"] if a["id"] == rule]


def test_a_healthy_job_raises_nothing(tmp_path, probe_dir):
    # Two ranks, one worker each, a step that mostly waits (as for a GPU): the CPUs have room, nobody lags. A step of
    # 0.2 s leaves the worker time to have its next batch ready even when it waits for a CPU on a busy machine (at
    # 0.03 s a busy run once waited 10 % of each step for data: data-starved), and keeps a busy machine's stalls
    # (a rank off the CPU for tens of ms, so both wait in the all-reduce) well inside the step: at 0.1 s one busy
    # run's slowest steps read 1.5x the median, step-variance's threshold.
    doc = torchrun(tmp_path, probe_dir, 2, "--workers", "1", "--work", "4", "--step-s", "0.2")

    assert sorted(ranks_of(doc).values()) == [0, 1]
    assert [(a["id"], a["title"]) for a in doc["advice"]] == []


def test_a_rank_slowed_in_its_step_is_named_the_straggler(tmp_path, probe_dir):
    doc = torchrun(tmp_path, probe_dir, 2, "--workers", "0", "--work", "30", "--slow-rank", "1", "--slow-factor", "3")

    (straggler,) = found(doc, "straggler")
    rank_of = ranks_of(doc)
    assert rank_of[straggler["pid"]] == 1
    assert straggler["title"] == "Straggler: rank 1 holds the other 1 back"
    assert straggler["evidence"]["own_step_s"] > 1.15 * straggler["evidence"]["others_own_step_s"]
    assert straggler["pids"][0] == straggler["pid"] and sorted(straggler["pids"]) == sorted(rank_of)
    assert straggler["job"] and "host" not in straggler["evidence"]  # a local rank has no host to name
    assert found(doc, "rank-imbalance") == []


def test_a_rank_that_sleeps_in_its_step_is_named_within_30_s_with_the_phase(tmp_path, probe_dir):
    # Rank 1 spends 60 ms of each step off the CPU (as when it reads a slow disk or waits on a slower GPU): both
    # ranks' main threads mostly wait, so only the step's phases show who holds the other back. The job trains for
    # 30 s, under the advisor's default 20 s window.
    doc = torchrun(
        tmp_path,
        probe_dir,
        2,
        "--workers",
        "1",
        "--work",
        "4",
        "--sleep-rank",
        "1",
        "--sleep-s",
        "0.06",
        seconds=30,
        window=20,
    )

    (straggler,) = found(doc, "straggler")
    rank_of = ranks_of(doc)
    assert rank_of[straggler["pid"]] == 1
    assert straggler["evidence"]["phase"] == "other"  # the sleep is in the job's own code, between the phases
    assert "other" in straggler["detail"]


def test_a_rank_with_a_slow_dataset_raises_rank_imbalance_not_straggler(tmp_path, probe_dir):
    doc = torchrun(
        tmp_path, probe_dir, 2, "--workers", "1", "--work", "4", "--slow-data-rank", "1", "--item-s", "0.004"
    )

    (imbalance,) = found(doc, "rank-imbalance")
    rank_of = ranks_of(doc)
    assert [rank_of[pid] for pid in imbalance["pids"]] == [1]
    assert imbalance["evidence"]["slow_ranks"] == [1]
    assert found(doc, "straggler") == []


def test_ranks_times_workers_beyond_the_cores_share_the_cores_out_per_node(tmp_path, probe_dir):
    # Enough workers per rank that the node's processes outnumber its cores, each worker busy on the CPU with
    # every sample, and a main loop that asks for batches faster than they come.
    workers = CORES
    doc = torchrun(tmp_path, probe_dir, 2, "--workers", str(workers), "--work", "2", "--item-work", "400")

    (busy,) = found(doc, "node-cpu-oversubscribed")
    assert busy["suggest"] == {"num_workers": max(0, CORES // 2 - 1)}
    assert busy["evidence"]["ranks"] == 2 and busy["evidence"]["workers"] == 2 * workers
    assert sorted(busy["pids"]) == sorted(ranks_of(doc))
    assert found(doc, "too-many-workers") == [], "the node's finding, not one per rank"
