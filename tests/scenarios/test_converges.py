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


def run(tmp_path: Path, name: str, workers: int) -> dict:
    """``gputop run --headless`` over the scenarios' job with ``workers`` workers, each 8 samples × 16 ms asleep a
    batch, and a loop whose own work is 20 ms asleep a step; the report. A batch takes six times the loop's own
    work, so that a loop slowed by a busy machine (its step's real work and its wake-ups late) still needs more
    workers than one."""
    report = tmp_path / f"{name}.json"
    job = [sys.executable, "-W", "ignore", str(JOB), "--seconds", "10", "--workers", str(workers), "--persistent"]
    job += ["--batch-size", "8", "--item-sleep-s", "0.016", "--step-sleep-s", "0.02"]
    argv = [sys.executable, "-m", "gputop", "run", "--headless", "--window", str(WINDOW_S)]
    argv += ["--no-history", "--report-json", str(report), "--", *job]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(report.read_text())


def starved(doc: dict) -> dict | None:
    return next((a for a in doc["advice"] if a["id"] == "data-starved"), None)


def test_the_workers_suggested_once_are_the_workers_asked_for_at_that_count(tmp_path: Path) -> None:
    first = starved(run(tmp_path, "one", 1))
    assert first is not None
    # A worker spends 8 × 16 ms and more on a batch, the loop 20 ms and more of its own a step: 3 or more workers.
    assert first["evidence"]["worker_batch_s"] >= 0.128
    suggested = first["suggest"]["num_workers"]
    assert suggested >= 3 and suggested == first["evidence"]["needed_workers"]

    second = starved(run(tmp_path, "followed", suggested))

    assert second is None or "num_workers" not in second["suggest"], second
