"""Is the advisor's num_workers right? An I/O-bound input pipeline, swept from 0 to 16 workers, against the value
the advisor suggests after watching the same job run with one worker.

The job: a Dataset whose ``__getitem__`` sleeps ``--item-ms`` (a read from slow storage or a remote store) and a
training step that sleeps ``--step-ms`` (the loop waiting for the GPU) after a small real forward and backward.
Throughput is samples per second over ``--batches`` batches after the workers are up, the median of
``--rounds`` sweeps. The suggestion comes from
``gputop run --headless --report-json`` on that job with ``num_workers=1``; it passes when its throughput is at
least 90 % of the sweep's best.

usage: python benchmarks/advice_quality.py [--max-workers 16] [--batches 150] [--rounds 3] [--window 5]
Prints the sweep as a Markdown table (docs/benchmarks.md) and exits 1 if the suggestion misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.9


def make_loader(workers: int, batch_size: int, item_s: float, batches: int):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class SlowReads(Dataset):
        def __len__(self) -> int:
            return batches * batch_size

        def __getitem__(self, i: int) -> torch.Tensor:
            time.sleep(item_s)
            return torch.full((64,), float(i % 7))

    return DataLoader(SlowReads(), batch_size=batch_size, num_workers=workers, persistent_workers=workers > 0)


def make_step(step_s: float):
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(batch) -> None:
        loss = model(batch).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(step_s)

    return step


def throughput(workers: int, args: argparse.Namespace) -> float:
    """Samples per second with ``workers`` workers, once the workers are up (the first batches are not counted)."""
    warmup = max(5, 2 * workers)
    loader = make_loader(workers, args.batch_size, args.item_ms / 1000, args.batches + warmup)
    step = make_step(args.step_ms / 1000)
    started = None
    for n, batch in enumerate(loader):
        if n == warmup:
            started = time.perf_counter()
        step(batch)
    return args.batches * args.batch_size / (time.perf_counter() - started)


def run_job(args: argparse.Namespace) -> int:
    """The job itself, for ``gputop run``: train for ``--seconds``."""
    loader = make_loader(args.workers, args.batch_size, args.item_ms / 1000, 1_000_000)
    step = make_step(args.step_ms / 1000)
    end = time.monotonic() + args.seconds
    for batch in loader:
        step(batch)
        if time.monotonic() >= end:
            return 0
    return 0


def suggestion(args: argparse.Namespace) -> tuple[int | None, dict]:
    """What ``gputop run`` advises on the job run with one worker, and its finding."""
    job = [sys.executable, "-W", "ignore", __file__, "--job", "--workers", "1", "--seconds", str(args.seconds)]
    job += ["--item-ms", str(args.item_ms), "--step-ms", str(args.step_ms), "--batch-size", str(args.batch_size)]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        env = {**os.environ, "GPUTOP_PROBE_DIR": str(Path(scratch) / "probe")}
        gputop = [sys.executable, "-m", "gputop", "run", "--headless", "-d", "1000", "--window", str(args.window)]
        subprocess.run([*gputop, "--report-json", str(report), "--", *job], cwd=ROOT, env=env, check=True)
        advice = {a["id"]: a for a in json.loads(report.read_text())["advice"]}
    found = advice.get("data-starved", {})
    return found.get("suggest", {}).get("num_workers"), found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-workers", type=int, default=16)
    parser.add_argument("--batches", type=int, default=150, help="measured batches per configuration")
    parser.add_argument("--rounds", type=int, default=3, help="sweeps; each count's median is reported")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--item-ms", type=float, default=2.0, help="each sample's read, asleep")
    parser.add_argument("--step-ms", type=float, default=4.0, help="each step's GPU time, asleep")
    parser.add_argument("--window", type=float, default=5.0, help="the advisor's window")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the advised job runs")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        return run_job(args)

    suggested, finding = suggestion(args)
    counts = sorted({*range(args.max_workers + 1), *([suggested] if suggested is not None else [])})
    # Rounds over every count, the median of each: drifting load on a shared machine hits all counts alike.
    rounds = [{n: throughput(n, args) for n in counts} for _ in range(args.rounds)]
    sweep = {n: statistics.median(r[n] for r in rounds) for n in counts}
    best = max(sweep.values())
    cores = len(os.sched_getaffinity(0))
    print(f"I/O-bound loader: {args.item_ms:g} ms per sample asleep, batch {args.batch_size}, step {args.step_ms:g} ms")
    print(f"{cores} usable cores; median of {args.rounds} rounds of {args.batches} batches per count\n")
    print("| num_workers | samples/s | of the best |")
    print("|---:|---:|---:|")
    for n, rate in sorted(sweep.items()):
        mark = " ← suggested" if n == suggested else ""
        print(f"| {n} | {rate:.0f} | {rate / best:.0%}{mark} |")
    print()
    evidence = finding.get("evidence", {})
    print(
        f"advisor at num_workers=1: data wait {evidence.get('data_wait_share')}, "
        f"{evidence.get('steps_per_s')} steps/s, bottleneck {evidence.get('bottleneck')}"
    )
    if suggested is None:
        print("advisor suggested no num_workers: FAIL")
        return 1
    share = sweep[suggested] / best
    verdict = "PASS" if share >= TARGET else "FAIL"
    print(f"suggested num_workers={suggested}: {share:.0%} of the best ({TARGET:.0%} needed): {verdict}")
    return 0 if share >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
