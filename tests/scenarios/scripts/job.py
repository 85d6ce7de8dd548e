"""A small real training job whose bottleneck is chosen on the command line, for the advisor's scenarios.

A two-layer model trains on batches from a real DataLoader for ``--seconds`` after the first batch, then the
job exits. The knobs put the time where a scenario wants it: in ``__getitem__`` asleep (I/O) or on the CPU
(transforms), in the step asleep (the GPU computing) or on the CPU (Python overhead). With ``$SCENARIO_GPU`` the
job lists itself on the fake GPU (tests/scenarios/gpu.py) when its first batch arrives. Keep the defaults small:
tests run on two cores.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import sys
import threading
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.scenarios import gpu


def spin(cpu_s: float) -> None:
    """Use ``cpu_s`` of this process's CPU time: under contention it takes longer, as real work does."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


class Samples(Dataset):
    def __init__(
        self,
        size: int,
        shape: tuple[int, ...],
        sleep_s: float,
        cpu_s: float,
        objects: int,
        slow: tuple[int, int, float] = (1, 0, 0.0),
    ) -> None:
        self.size, self.shape, self.sleep_s, self.cpu_s = size, shape, sleep_s, cpu_s
        # (batch size, every how many batches, seconds): the first sample of every such batch sleeps that long more,
        # as a batch whose files sit on a slower disk or miss the page cache.
        self.batch_size, self.slow_every, self.slow_s = slow
        # Python objects that a worker copies page by page as it touches their reference counts.
        self.objects = [[i] for i in range(objects)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.slow_every and i % (self.batch_size * self.slow_every) == 0:
            time.sleep(self.slow_s)
        if self.cpu_s:
            spin(self.cpu_s)
        if self.objects:
            chunk = len(self.objects) // self.size + 1
            for item in self.objects[i * chunk : (i + 1) * chunk]:
                item[0] += 0
        return torch.full(self.shape, float(i % 7))


def worker_init(cuda: bool, init_s: float, worker_id: int) -> None:
    if init_s:
        time.sleep(init_s)  # as a worker that opens its files or loads an index before its first sample
    if cuda:
        gpu.join(os.getpid(), worker=True)  # as a worker that calls torch.cuda would appear to NVML


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0, help="training time after the first batch")
    parser.add_argument(
        "--warmup-steps", type=int, default=0, help="steps before the training time counts (slow on a busy host)"
    )
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epoch-batches", type=int, default=100)
    parser.add_argument("--persistent", action="store_true")
    parser.add_argument("--prefetch", type=int, default=None, help="the DataLoader's prefetch_factor")
    parser.add_argument("--slow-every", type=int, default=0, help="one batch in this many is slow")
    parser.add_argument("--slow-batch-s", type=float, default=0.0, help="what a slow batch sleeps more")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--rows", type=int, default=0, help="samples of ROWS x WIDTH instead of WIDTH")
    parser.add_argument("--item-sleep-s", type=float, default=0.0, help="per sample, asleep (I/O)")
    parser.add_argument("--item-cpu-s", type=float, default=0.0, help="per sample, on the CPU (transforms)")
    parser.add_argument("--step-sleep-s", type=float, default=0.0, help="per step, asleep (the GPU computing)")
    parser.add_argument("--step-cpu-s", type=float, default=0.0, help="per step, on the CPU (Python overhead)")
    parser.add_argument("--leak", action="store_true", help="keep a metric of every step with its graph")
    parser.add_argument("--stall-after-s", type=float, default=None, help="then wait on a lock to the end")
    parser.add_argument("--objects", type=int, default=0, help="Python objects in the Dataset")
    parser.add_argument("--cuda-in-worker", action="store_true")
    parser.add_argument("--worker-init-s", type=float, default=0.0, help="each worker's start-up")
    parser.add_argument("--until-file", type=Path, default=None, help="stop once this file exists (or --seconds)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(
        Samples(
            args.epoch_batches * args.batch_size,
            (args.rows, args.width) if args.rows else (args.width,),
            args.item_sleep_s,
            args.item_cpu_s,
            args.objects,
            (args.batch_size, args.slow_every, args.slow_batch_s),
        ),
        batch_size=args.batch_size,
        num_workers=args.workers,
        prefetch_factor=args.prefetch if args.workers else None,
        persistent_workers=args.persistent and args.workers > 0,
        pin_memory=args.pin_memory,
        worker_init_fn=functools.partial(worker_init, args.cuda_in_worker, args.worker_init_s),
    )
    metrics = []
    started = counted = None
    steps = 0
    while True:
        for batch in loader:
            now = time.monotonic()
            if started is None:
                started = now
                gpu.join(os.getpid())  # as a job that has moved its model to the GPU and starts its steps
                print("ready", flush=True)
            if counted is None and steps >= args.warmup_steps:
                counted = now
            if counted is not None and now - counted >= args.seconds:
                return 0
            if args.until_file is not None and args.until_file.exists():
                return 0
            steps += 1
            if args.stall_after_s is not None and now - started >= args.stall_after_s:
                threading.Event().wait(max(0.0, started + args.seconds - now))  # a futex, as a deadlock sleeps
                return 0
            loss = model(batch).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.leak:
                # A running metric computed with autograd on and kept: each one holds its graph's activations.
                metrics.append(model(batch).abs().mean())
            if args.step_sleep_s:
                time.sleep(args.step_sleep_s)
            if args.step_cpu_s:
                spin(args.step_cpu_s)


if __name__ == "__main__":
    status = main()
    # Python's teardown of torch's modules keeps the process on a CPU for seconds after the last step (tens on a
    # busy host) while the scenario's fake GPU, unlike a real one, still reads busy: the job would look like a
    # loop bound on its CPU. The exit handlers run (the probe's last report, the workers' shutdown); the teardown
    # of the modules does not.
    sys.stdout.flush()
    atexit._run_exitfuncs()
    os._exit(status)
