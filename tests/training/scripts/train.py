"""A small real training job for the tests: a DataLoader over a synthetic dataset, with the knobs a test needs.

It prints ``ready`` once its first batch has arrived, and on SIGTERM or SIGINT exits with 42 or 43, so a test can
tell a forwarded signal from a crash. Keep the default sizes small: the suite runs on two cores.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __init__(self, size: int, item_s: float, fail_at: int | None) -> None:
        self.size, self.item_s, self.fail_at = size, item_s, fail_at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.fail_at:
            raise ValueError(f"item {i} is broken")
        if self.item_s:
            time.sleep(self.item_s)
        return torch.full((4,), float(i))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--persistent", action="store_true")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--batches", type=int, default=20, help="batches per epoch")
    parser.add_argument("--epochs", type=int, default=1, help="0: until stopped")
    parser.add_argument("--item-s", type=float, default=0.0, help="seconds a worker spends per sample")
    parser.add_argument("--step-s", type=float, default=0.0, help="seconds the loop spends per batch")
    parser.add_argument("--fail-at", type=int, default=None, help="this sample raises ValueError")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--after-s", type=float, default=0.0, help="seconds spent after the loop (a checkpoint)")
    parser.add_argument("--optimizer", default=None, help="train MODEL with this torch.optim class (Adam, SGD...)")
    args = parser.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))  # MODEL
    optimizer = getattr(torch.optim, args.optimizer)(model.parameters(), lr=1e-3) if args.optimizer else None

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))
    loader = DataLoader(
        Numbers(args.batches * args.batch_size, args.item_s, args.fail_at),
        batch_size=args.batch_size,
        num_workers=args.workers,
        pin_memory=args.pin_memory,
        persistent_workers=args.persistent,
        multiprocessing_context=args.start_method if args.workers else None,
    )
    ready = False
    epoch = 0
    try:
        while args.epochs == 0 or epoch < args.epochs:
            for batch in loader:
                if not ready:
                    print("ready", flush=True)
                    ready = True
                if optimizer is not None:
                    model(batch).sum().backward()
                    optimizer.step()
                    optimizer.zero_grad()
                if args.step_s:
                    time.sleep(args.step_s)
            epoch += 1
    except KeyboardInterrupt:
        return 43
    except ValueError as exc:
        print(f"ValueError: {exc}", flush=True)
        return 7
    time.sleep(args.after_s)
    print(f"done {epoch} epochs", flush=True)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
