"""A training job whose phases take known times, for the step anatomy tests: each phase sleeps (off the CPU, so a
busy machine lengthens it little) and measures what it really slept, which is the truth the probe is held to.

- data: the DataLoader's ``collate_fn`` sleeps ``--data-s`` (``num_workers=0``: in the loop's own thread);
- forward: a module in the model sleeps ``--forward-s``;
- backward: a custom autograd Function sleeps ``--backward-s`` in its backward;
- optimizer: an SGD whose ``step`` sleeps ``--optimizer-s``;
- other: the loop sleeps ``--other-s`` after the optimizer step.

With ``--accumulate K`` the optimizer steps every K batches. It prints ``ready`` after the first step, and at the
end ``truth {json}``: the mean seconds per step of each phase as slept and of the whole step (from one batch's
arrival to the next), over the steps after the probe's warm-up, and ``flops N``: torch's own FLOP count of one
more step of the same model and batch.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.flop_counter import FlopCounterMode

WARMUP_STEPS = 5
slept: dict[str, list[float]] = {"data": [], "forward": [], "backward": [], "optimizer": [], "other": []}


def sleep(phase: str, seconds: float) -> None:
    started = time.perf_counter()
    time.sleep(seconds)
    slept[phase].append(time.perf_counter() - started)


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
        sleep("forward", self.seconds)
        return x


class SlowBackward(torch.autograd.Function):
    seconds = 0.0

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        sleep("backward", SlowBackward.seconds)
        return grad


class SleepySGD(torch.optim.SGD):
    seconds = 0.0

    def step(self, closure=None):  # type: ignore[no-untyped-def]
        sleep("optimizer", SleepySGD.seconds)
        return super().step(closure)


def main() -> int:
    parser = argparse.ArgumentParser()
    for phase, default in (("data", 0.04), ("forward", 0.06), ("backward", 0.08), ("optimizer", 0.04), ("other", 0.02)):
        parser.add_argument(f"--{phase}-s", type=float, default=default)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--accumulate", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    SlowBackward.seconds, SleepySGD.seconds = args.backward_s, args.optimizer_s

    def collate(rows: list[torch.Tensor]) -> torch.Tensor:
        sleep("data", args.data_s)
        return torch.stack(rows)

    layers = [torch.nn.Linear(32, 64), Sleepy(args.forward_s), torch.nn.ReLU(), torch.nn.Linear(64, 4)]
    model = torch.nn.Sequential(*layers)
    optimizer = SleepySGD(model.parameters(), lr=1e-3)
    loader = DataLoader(Rows(), batch_size=args.batch_size, collate_fn=collate)  # the line created_at names
    batches = args.steps * args.accumulate
    arrivals = []
    for index, batch in enumerate(loader):
        arrivals.append(time.perf_counter())
        if len(arrivals) == WARMUP_STEPS * args.accumulate:
            for durations in slept.values():
                durations.clear()  # the truth is taken over the steps the probe counts, past its warm-up
        SlowBackward.apply(model(batch)).sum().backward()
        if (index + 1) % args.accumulate == 0:
            optimizer.step()
            optimizer.zero_grad()
            sleep("other", args.other_s)
        if index == 0:
            print(f"ready {os.getpid()}", flush=True)
        if index + 1 == batches:
            break
    # Each phase as slept, once per batch or once per optimizer step; a step from one batch's arrival to the
    # arrival of the batch that comes after its optimizer step.
    per_step = {"data": args.accumulate, "forward": args.accumulate, "backward": args.accumulate}
    truth = {phase: sum(d) / len(d) * per_step.get(phase, 1) for phase, d in slept.items()}
    first = WARMUP_STEPS * args.accumulate
    truth["step"] = (arrivals[-1] - arrivals[first]) / ((len(arrivals) - 1 - first) / args.accumulate)
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
