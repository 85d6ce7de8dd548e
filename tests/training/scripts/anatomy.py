"""A training job whose phases take known times, for the step anatomy tests: each phase sleeps (off the CPU, so a
busy machine lengthens it little), and the loop times each call that makes a phase with its own clock (``next``
of the loader, the model's call, ``backward()``, ``optimizer.step()``): the truth the probe is held to.

- data: the DataLoader's ``collate_fn`` sleeps ``--data-s`` (``num_workers=0``: in the loop's own thread);
- forward: a module in the model sleeps ``--forward-s``;
- backward: a custom autograd Function sleeps ``--backward-s`` in its backward;
- optimizer: an SGD whose ``step`` sleeps ``--optimizer-s``;
- other: the loop sleeps ``--other-s`` after the optimizer step.

With ``--accumulate K`` the optimizer steps every K batches. It prints ``ready`` after the first step, and at the
end ``truth {json}``: the mean seconds per step of each phase as the loop timed it and of the whole step (from
one batch's arrival to the next), over the steps after the probe's warm-up, and ``flops N``: torch's own FLOP
count of one more step of the same model and batch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils.data import DataLoader, Dataset
from torch.utils.flop_counter import FlopCounterMode

WARMUP_STEPS = 5


class Rows(Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((32,), float(i % 5))


class Sleepy(torch.nn.Module):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        return x


class SlowBackward(torch.autograd.Function):
    seconds = 0.0

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        time.sleep(SlowBackward.seconds)
        return grad


class SleepySGD(torch.optim.SGD):
    seconds = 0.0

    def step(self, closure=None):  # type: ignore[no-untyped-def]
        time.sleep(SleepySGD.seconds)
        return super().step(closure)


def main() -> int:
    parser = argparse.ArgumentParser()
    for phase, default in (("data", 0.04), ("forward", 0.06), ("backward", 0.08), ("optimizer", 0.04), ("other", 0.06)):
        parser.add_argument(f"--{phase}-s", type=float, default=default)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--accumulate", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    SlowBackward.seconds, SleepySGD.seconds = args.backward_s, args.optimizer_s

    def collate(rows: list[torch.Tensor]) -> torch.Tensor:
        time.sleep(args.data_s)
        return torch.stack(rows)

    layers = [torch.nn.Linear(32, 64), Sleepy(args.forward_s), torch.nn.ReLU(), torch.nn.Linear(64, 4)]
    model = torch.nn.Sequential(*layers)
    optimizer = SleepySGD(model.parameters(), lr=1e-3)
    loader = DataLoader(Rows(), batch_size=args.batch_size, collate_fn=collate)  # the line created_at names
    # One record per step (the batches up to an optimizer step): the seconds of each phase as the loop timed its
    # calls, when its first batch arrived, and whether the probe counted its FLOPs then (its dispatch mode is on),
    # which slows that step down: the probe leaves it out of its statistics, and so does the truth.
    steps: list[dict[str, Any]] = []
    iterator = iter(loader)

    def timed(phase: str, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        result = call(*args)
        steps[-1][phase] += time.perf_counter() - started
        return result

    for index in range(args.steps * args.accumulate):
        if index % args.accumulate == 0:
            steps.append({"data": 0.0, "forward": 0.0, "backward": 0.0, "optimizer": 0.0, "counted": False})
        batch = timed("data", next, iterator)
        if index % args.accumulate == 0:
            steps[-1]["arrived"] = time.perf_counter()
        steps[-1]["counted"] |= _get_current_dispatch_mode() is not None
        loss = SlowBackward.apply(timed("forward", model, batch)).sum()
        timed("backward", loss.backward)
        if (index + 1) % args.accumulate == 0:
            timed("optimizer", optimizer.step)
            optimizer.zero_grad()
            time.sleep(args.other_s)
        if index == 0:
            print(f"ready {os.getpid()}", flush=True)
    # A step's length: from its first batch's arrival to the next step's (each holds one wait for data).
    for step, following in itertools.pairwise(steps):
        step["step"] = following["arrived"] - step["arrived"]
    kept = [step for step in steps[WARMUP_STEPS:-1] if not step["counted"]]
    truth = {
        key: statistics.mean(step[key] for step in kept) for key in ("data", "forward", "backward", "optimizer", "step")
    }
    print("truth " + json.dumps(truth), flush=True)
    print(f"pid {os.getpid()}", flush=True)
    batch = torch.stack([Rows()[i] for i in range(args.batch_size)])  # a batch of the same shape, no new request
    with FlopCounterMode(display=False) as counter:
        for _ in range(args.accumulate):
            SlowBackward.apply(model(batch)).sum().backward()
        optimizer.step()
    print(f"flops {counter.get_total_flops()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
