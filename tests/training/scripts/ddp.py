"""A small real data-parallel training job for the tests, started by torchrun on the CPU (gloo): each rank trains
a linear model under DistributedDataParallel from its own DataLoader with workers, for ``--seconds``.

``--slow-rank N`` makes rank N compute ``--slow-factor`` times as much per step (a straggler); ``--slow-data-rank N``
makes rank N's dataset sleep ``--item-s`` per sample (a slow shard); ``--sleep-rank N`` makes rank N sleep
``--sleep-s`` in its compute each step, off the CPU (a rank reading from a slow disk, or waiting on a slower GPU).
Prints ``ready`` on rank 0 after the first
step.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __init__(self, size: int, item_s: float, item_work: int = 0) -> None:
        self.size, self.item_s, self.item_work = size, item_s, item_work

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.item_s:
            time.sleep(self.item_s)
        x = torch.full((64,), float(i % 7))
        for _ in range(self.item_work):  # decoding or augmenting a sample on the worker's CPU
            x = torch.tanh(x * 1.01)
        return x


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--work", type=int, default=40, help="matmuls of 128x128 per step on every rank")
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--slow-factor", type=float, default=3.0)
    parser.add_argument("--slow-data-rank", type=int, default=None)
    parser.add_argument("--item-s", type=float, default=0.004)
    parser.add_argument("--item-work", type=int, default=0, help="CPU work per sample in the workers")
    parser.add_argument("--step-s", type=float, default=0.0, help="seconds each step sleeps (waiting for a GPU)")
    parser.add_argument("--sleep-rank", type=int, default=None)
    parser.add_argument("--sleep-s", type=float, default=0.06)
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DistributedDataParallel(torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    item_s = args.item_s if rank == args.slow_data_rank else 0.0
    loader = DataLoader(
        Numbers(1_000_000, item_s, args.item_work),
        batch_size=args.batch_size,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
    )
    work = int(args.work * (args.slow_factor if rank == args.slow_rank else 1.0))
    weight = torch.randn(128, 128) / 12
    deadline = time.monotonic() + args.seconds
    for step, batch in enumerate(loader):
        x = torch.randn(128, 128)
        for _ in range(work):  # the rank's own compute, before the gradients' all-reduce
            x = torch.tanh(x @ weight)
        if rank == args.sleep_rank:
            time.sleep(args.sleep_s)
        loss = model(batch).sum() + x.mean() * 0
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if args.step_s:
            time.sleep(args.step_s)
        if step == 0 and rank == 0:
            print("ready", flush=True)
        stop = torch.tensor([time.monotonic() >= deadline], dtype=torch.int32)
        dist.all_reduce(stop)
        if stop.item():
            break
    dist.destroy_process_group()
    print(f"rank {rank} done pid {os.getpid()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
