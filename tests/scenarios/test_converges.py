"""Advice followed once: a real job whose workers each take a known time per batch (asleep, as on slow storage) is
told a num_workers; run again with that many, it is told no other. The count comes from what each worker spends
on a batch, timed inside the worker, so it holds whatever the rest of the wait is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scenarios.conftest import JOB

WINDOW_S = 4
TIMEOUT_S = 240


def run(tmp_path: Path, name: str, workers: int, *knobs: str, item_s: float, step_s: float) -> dict:
    """``gputop run --headless`` over the scenarios' job with ``workers`` workers, each 8 samples × ``item_s``
    asleep a batch, and a loop whose own work is ``step_s`` asleep a step; the report."""
    report = tmp_path / f"{name}.json"
    job = [sys.executable, "-W", "ignore", str(JOB), "--seconds", "10", "--workers", str(workers), "--persistent"]
    job += ["--batch-size", "8", "--item-sleep-s", str(item_s), "--step-sleep-s", str(step_s), *knobs]
    argv = [sys.executable, "-m", "gputop", "run", "--headless", "--window", str(WINDOW_S)]
    argv += ["--no-history", "--report-json", str(report), "--", *job]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(report.read_text())


def starved(doc: dict) -> dict | None:
    return next((a for a in doc["advice"] if a["id"] == "data-starved"), None)


def test_the_workers_suggested_once_are_the_workers_asked_for_at_that_count(tmp_path: Path) -> None:
    # A worker spends 8 × 48 ms and more on a batch, the loop 60 ms and more of its own a step. The loop's own work
    # is what it does between batches as the machine lets it: on a busy machine each wake-up from its sleep waits
    # for a CPU, 20 ms and more at a load of 6 on 2 cores, and that load changes between two runs. With a 20 ms
    # step one busy run measured 43 ms, then 24.5 ms at the count it was told (4, then 7): the machine's load
    # moved, not the job. Against a 60 ms step the same delays move the loop's work by less than the advisor's
    # headroom and noise band together (1.25 × 1.25), so the count told once is asked for again.
    slow = {"item_s": 0.048, "step_s": 0.06}
    first = starved(run(tmp_path, "one", 1, **slow))
    assert first is not None
    assert first["evidence"]["worker_batch_s"] >= 0.384
    suggested = first["suggest"]["num_workers"]
    assert suggested >= 3 and suggested == first["evidence"]["needed_workers"]

    second = starved(run(tmp_path, "followed", suggested, **slow))

    assert second is None or "num_workers" not in second["suggest"], second


def test_the_prefetch_factor_suggested_once_is_the_depth_asked_for_at_that_depth(tmp_path: Path) -> None:
    # Three workers that keep up on average (a batch in 16 ms, one in ten 250 ms more: about 41 ms a batch each,
    # 14 ms for the three, against the loop's 20 ms and more), but the default queue of 2 × 3 batches, 6 steps
    # ahead, is 120 ms: a slow batch holds the loop. Workers are not the cure, a deeper queue is.
    slow = ("--slow-every", "10", "--slow-batch-s", "0.25")
    first = starved(run(tmp_path, "shallow", 3, *slow, item_s=0.002, step_s=0.02))
    assert first is not None
    assert "num_workers" not in first["suggest"], first
    assert first["evidence"]["worker_batch_p95_s"] >= 0.25
    # S × 1.25 / (workers × C): 266 ms with its headroom over 3 × 20 ms and more, so 6 at most, and more than the
    # default 2. A busy CI run measured C longer in the first run than in the second: told 3 without the headroom,
    # then 4 at 3.
    depth = first["suggest"]["prefetch_factor"]
    assert 3 <= depth <= 6, first

    second = starved(run(tmp_path, "deep", 3, *slow, "--prefetch", str(depth), item_s=0.002, step_s=0.02))

    assert second is None or not {"num_workers", "prefetch_factor"} & set(second["suggest"]), second
