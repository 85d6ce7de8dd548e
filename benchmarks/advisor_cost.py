"""What the advisor costs per snapshot: 1, 8 and 64 training processes, each with a probe report, four workers
and a GPU, every rule evaluated at every snapshot once the history is full (default window, 1 s ticks).

Two shapes of the same jobs: ``steady``, every process reporting the same numbers at every tick (the advisor's
findings hold still), and ``changing``, where what a live job reports moves at every tick (its data wait, steps
per second, main thread, workers' CPU, GPU busy and memory), so no statistic of a window stays as it was. Times
are CPU time (``time.process_time``) per snapshot: the median and p95 of the ticks once the history is full, and
the same with every rule a no-op (the engine's own bookkeeping and sampling).

usage: python benchmarks/advisor_cost.py [--ticks 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.advisor import Advisor, AdvisorConfig
from gputop.model import DriverInfo, HostProcess, Snapshot
from tests.advisor.build import gpu, host, loader, row, view, workers

STEADY = "steady"
CHANGING = "changing"


def snapshots(processes: int, ticks: int = 200, shape: str = STEADY) -> list[Snapshot]:
    rng = random.Random(processes)
    rows = tuple(dataclasses.replace(row(pid=1000 + n), gpu_index=n % 8) for n in range(processes))
    hosts = tuple(HostProcess(pid=1000 + n, ppid=1, rss_bytes=1 << 30, start_time=-3600.0) for n in range(processes))
    steady_views = tuple(
        view(loader(wait=0.2), workers(4, first=100_000 + 10 * n), pid=1000 + n) for n in range(processes)
    )
    steady_gpus = tuple(dataclasses.replace(gpu(busy=60), index=i) for i in range(8))

    def changing_views(t: int) -> tuple:
        return tuple(
            view(
                loader(wait=rng.uniform(0.15, 0.25), steps=rng.uniform(9.0, 11.0), batches=1000 + 10 * t),
                workers(4, cpu=rng.uniform(1.0, 3.0), uss_mib=rng.uniform(95, 105), first=100_000 + 10 * n),
                main_busy=rng.uniform(0.25, 0.35),
                pid=1000 + n,
            )
            for n in range(processes)
        )

    def changing_gpus() -> tuple:
        return tuple(
            dataclasses.replace(gpu(busy=rng.uniform(55, 65), used_gib=rng.uniform(39, 41)), index=i) for i in range(8)
        )

    return [
        Snapshot(
            time=float(t),
            host=host(),
            driver=DriverInfo("ok"),
            gpus=steady_gpus if shape == STEADY else changing_gpus(),
            processes=rows,
            host_processes=hosts,
            training=steady_views if shape == STEADY else changing_views(t),
        )
        for t in range(ticks)
    ]


def cost(processes: int, ticks: int, shape: str, no_op: bool = False) -> tuple[float, float]:
    """Median and p95 CPU milliseconds per snapshot once the history is full."""
    config = AdvisorConfig()
    advisor = Advisor(config=config)
    if no_op:
        advisor.rules = tuple(dataclasses.replace(r, check=lambda w, c: None) for r in advisor.rules)
        advisor.job_rules = tuple(dataclasses.replace(r, check=lambda j, w, c: None) for r in advisor.job_rules)
    times = []
    for snap in snapshots(processes, ticks, shape):
        started = time.process_time()
        advisor.update(snap)
        times.append(time.process_time() - started)
    steady = sorted(times[int(config.history_s) :])  # once the history is full
    return statistics.median(steady) * 1000, steady[int(0.95 * (len(steady) - 1))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200, help="snapshots per run (the first 135 fill the history)")
    args = parser.parse_args()
    print("| training processes | steady: ms per snapshot (median) | p95 | changing: median | p95 | rules no-op |")
    print("|---:|---:|---:|---:|---:|---:|")
    for processes in (1, 8, 64):
        steady, steady_p95 = cost(processes, args.ticks, STEADY)
        changing, changing_p95 = cost(processes, args.ticks, CHANGING)
        floor, _ = cost(processes, args.ticks, STEADY, no_op=True)
        print(f"| {processes} | {steady:.2f} | {steady_p95:.2f} | {changing:.2f} | {changing_p95:.2f} | {floor:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
