"""What the advisor costs per snapshot: 1, 8 and 64 training processes, each with a probe report, four workers
and a GPU, every rule evaluated at every snapshot once the history is full (default window, 1 s ticks).

usage: python benchmarks/advisor_cost.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.advisor import Advisor, AdvisorConfig
from gputop.model import DriverInfo, HostProcess, Snapshot
from tests.advisor.build import gpu, host, loader, row, view, workers

TICKS = 200


def snapshots(processes: int) -> list[Snapshot]:
    views = tuple(view(loader(wait=0.2), workers(4, first=100_000 + 10 * n), pid=1000 + n) for n in range(processes))
    gpus = tuple(dataclasses.replace(gpu(busy=60), index=i) for i in range(8))
    rows = tuple(dataclasses.replace(row(pid=1000 + n), gpu_index=n % 8) for n in range(processes))
    hosts = tuple(HostProcess(pid=1000 + n, ppid=1, rss_bytes=1 << 30, start_time=-3600.0) for n in range(processes))
    return [
        Snapshot(
            time=float(t),
            host=host(),
            driver=DriverInfo("ok"),
            gpus=gpus,
            processes=rows,
            host_processes=hosts,
            training=views,
        )
        for t in range(TICKS)
    ]


def main() -> int:
    config = AdvisorConfig()
    print("| training processes | ms per snapshot (median) | p95 |")
    print("|---:|---:|---:|")
    for processes in (1, 8, 64):
        advisor = Advisor(config=config)
        times = []
        for snap in snapshots(processes):
            started = time.perf_counter()
            advisor.update(snap)
            times.append(time.perf_counter() - started)
        steady = sorted(times[int(config.history_s) :])  # once the history is full
        p95 = steady[int(0.95 * (len(steady) - 1))]
        print(f"| {processes} | {statistics.median(steady) * 1000:.2f} | {p95 * 1000:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
