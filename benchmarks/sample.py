"""Cost of one snapshot, and of `gputop --once --json`, over the fake driver with 8 GPUs and 64 GPU processes.

The 64 processes are real (`sleep`), so the host side reads real /proc entries.

usage: python benchmarks/sample.py [--rounds 300] [--once-runs 15]
Targets (docs/benchmarks.md): snapshot median <= 3 ms; `gputop --once --json` <= 0.25 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.collect.sampler import SnapshotMaker
from tests.fakenvml.build import build, use_in_process
from tests.fakenvml.state import FakeSample, write_state
from tests.machines import training_box


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def time_snapshots(maker: SnapshotMaker, rounds: int, force_slow: bool, cpu: list[float] | None = None) -> list[float]:
    """Wall milliseconds of each snapshot; with ``cpu``, also this process's CPU milliseconds of each."""
    took = []
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        maker.snapshot(force_slow=force_slow)
        took.append((time.perf_counter() - started) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - started_cpu) * 1000)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--once-runs", type=int, default=15)
    args = parser.parse_args()

    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(64)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            state_path = Path(tmp) / "state.txt"
            state = training_box(8, [p.pid for p in sleepers])
            now_us = int(time.time() * 1e6)
            for gpu in state.gpus:
                gpu.samples = [FakeSample(pid=p.pid, timestamp_us=now_us, sm=50, mem=20) for p in gpu.processes]
            write_state(state_path, state)
            # The fake re-parses a state file younger than 2 s at every call (mtime granularity), which would
            # measure the fake's parser instead of gputop.
            time.sleep(2.1)
            os.environ["FAKE_NVML_STATE"] = str(state_path)
            use_in_process("r550")

            maker = SnapshotMaker(slow_interval_s=float("inf"))
            maker.start()
            snap = maker.snapshot(force_slow=True)
            assert len(snap.gpus) == 8 and len(snap.processes) == 64, (len(snap.gpus), len(snap.processes))
            time_snapshots(maker, 20, force_slow=False)
            tick_cpu: list[float] = []
            slow_cpu: list[float] = []
            tick = time_snapshots(maker, args.rounds, force_slow=False, cpu=tick_cpu)
            slow = time_snapshots(maker, max(20, args.rounds // 5), force_slow=True, cpu=slow_cpu)
            maker.close()

            env = {**os.environ, "LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state_path)}
            command = [sys.executable, "-m", "gputop", "--once", "--json"]
            once = []
            for _ in range(args.once_runs):
                started = time.perf_counter()
                subprocess.run(command, env=env, check=True, capture_output=True)
                once.append(time.perf_counter() - started)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()

    print("| measure (8 GPUs, 64 GPU processes) | median | p95 | CPU, median |")
    print("|---|---|---|---|")
    rows = (
        (f"snapshot, every tick ({len(tick)} runs)", tick, "ms", f"{statistics.median(tick_cpu):.2f} ms"),
        (
            f"snapshot with process lists, PCIe, ECC ({len(slow)} runs)",
            slow,
            "ms",
            f"{statistics.median(slow_cpu):.2f} ms",
        ),
        (f"`gputop --once --json` wall time ({len(once)} runs)", once, "s", ""),
    )
    for label, values, unit, cpu in rows:
        digits = 3 if unit == "s" else 2
        median, p95 = statistics.median(values), percentile(values, 0.95)
        print(f"| {label} | {median:.{digits}f} {unit} | {p95:.{digits}f} {unit} | {cpu} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
