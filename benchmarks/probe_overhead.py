"""Cost of the in-process probe: a tight loop over a real DataLoader with and without it.

The probe is installed, then passes over the loader run in pairs in the same process, one with its wrappers in
place and one with torch's original methods put back, the order flipped from pair to pair. Time is this
process's CPU time (the probe's writer thread included; DataLoader workers, other processes, are not), which
other load on the machine disturbs far less than wall time. The added cost is the median over pairs of
(with - without) per batch; the interquartile range of those differences shows the noise that remains. On a
shared 2-core box an A/A control (no probe on either side) of the ``step`` case gives medians of -1 to +6 µs:
differences that size are noise. The report writer runs throughout; its cost is also measured apart, as the
time one write takes.

Cases:

- ``inline``: ``num_workers=0``, one tiny tensor per batch: the cheapest batch torch can make, so the worst case
  for the probe's share;
- ``workers``: ``num_workers=2``, batches of 32 small tensors, as a real input pipeline delivers them;
- ``step``: ``inline`` plus a small training step (forward and backward of a 512x512 linear layer on 16 rows),
  a step far shorter than a real model's;
- ``optim``: ``step`` plus ``optimizer.step()`` and ``zero_grad()`` of SGD with momentum, with the probe's global
  optimizer step hook (which counts weights, gradients and optimizer state every few seconds) on one side only.
- ``anatomy``: a whole step of a deeper model (8 blocks of a 128x128 linear layer and a ReLU, 17 module calls a
  forward pass, 16 rows), its backward pass and SGD's step, with everything the step anatomy adds on one side
  only: the step boundary in ``__next__``, the global forward hooks of sampled steps, the wrapper of
  ``torch.autograd.backward``, the optimizer step pre and post hooks.

Each hook is also timed alone (``hook_costs``): a million calls in a loop, on a sampled step and on one that is
not, and the step that counts FLOPs once is timed against the steps around it.

The cost of one count of a model's tensors (the walk over every parameter, its gradient and its optimizer state
that the hook runs at most every 5 s) is measured apart, on a 24-block transformer's parameters.

usage: python benchmarks/probe_overhead.py [--pairs 40]
Target: the probe adds under 1 % to a training step (docs/training.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gputop.probe
from gputop.probe.hooks import TARGET

CASES = {"inline": 5000, "workers": 300, "step": 500, "optim": 300, "anatomy": 300}
"""Each case and its batches per pass (about 0.1-0.3 s each)."""
WRAPPED = ("__init__", "_reset", "__next__")
CLOCK = time.process_time


def make_loop(case: str, batches: int) -> Callable[[], float]:
    """One pass over a fresh loader for ``case``; returns µs per batch."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Tiny(Dataset):
        def __len__(self) -> int:
            return batches * (32 if case == "workers" else 1)

        def __getitem__(self, i: int) -> torch.Tensor:
            return torch.full((8,), float(i))

    if case == "workers":
        loader = DataLoader(Tiny(), batch_size=32, num_workers=2, persistent_workers=True)
    else:
        loader = DataLoader(Tiny(), batch_size=1, num_workers=0)
    if case == "anatomy":
        layers = [m for _ in range(8) for m in (torch.nn.Linear(128, 128), torch.nn.ReLU())]
        model: Any = torch.nn.Sequential(*layers)
        x = torch.randn(16, 128)
    else:
        model = torch.nn.Linear(512, 512)
        x = torch.randn(16, 512)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def one_pass() -> float:
        started = CLOCK()
        n = 0
        for _ in loader:
            if case in ("step", "optim", "anatomy"):
                model(x).sum().backward()
            if case in ("optim", "anatomy"):
                optimizer.step()
                optimizer.zero_grad()
            n += 1
        return (CLOCK() - started) / n * 1e6

    return one_pass


def measure(
    one_pass: Callable[[], float], pairs: int, base: type, wrapped: dict, original: dict
) -> tuple[float, list[float]]:
    """Median µs per batch without the probe, and each pair's (with - without) in µs per batch."""

    import torch
    import torch.optim.optimizer as optim

    # the probe's step hooks, registered at its first read
    hooks = dict(optim._global_optimizer_post_hooks)
    pre_hooks = dict(optim._global_optimizer_pre_hooks)
    tracker = gputop.probe.installed().steps
    switch = tracker.forward_hooks
    backward = torch.autograd.backward

    def timed(probe_on: bool) -> float:
        for name in WRAPPED:
            setattr(base, name, (wrapped if probe_on else original)[name])
        optim._global_optimizer_post_hooks.clear()
        optim._global_optimizer_pre_hooks.clear()
        if switch is not None:
            switch(False)
            tracker.hooks_on = False
        tracker.forward_hooks = switch if probe_on else None
        torch.autograd.backward = backward if probe_on else getattr(backward, "__wrapped__", backward)
        if probe_on:
            optim._global_optimizer_post_hooks.update(hooks)
            optim._global_optimizer_pre_hooks.update(pre_hooks)
        return one_pass()

    timed(False), timed(True)  # warm-up: worker start, allocator, the writer thread
    baseline, added = [], []
    for pair in range(pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        took = {probe_on: timed(probe_on) for probe_on in order}
        baseline.append(took[False])
        added.append(took[True] - took[False])
    return statistics.median(baseline), added


def tensor_walk_us(torch: Any) -> tuple[float, int]:
    """Median µs of one count of a 24-block transformer encoder's weights, gradients and AdamW state."""
    from gputop.probe.tensors import TensorReader

    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 24, enable_nested_tensor=False)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 8, 256)).sum().backward()
    optimizer.step()
    reader = TensorReader()
    reader._optimizers.add(optimizer)
    took = []
    for _ in range(50):
        started = time.perf_counter()
        reader.walk(started)
        took.append((time.perf_counter() - started) * 1e6)
    return statistics.median(took), len(list(model.parameters()))


def hook_costs(torch: Any) -> dict[str, tuple[float, float]]:
    """µs per call of each of the step's hooks, on a step that is sampled and on one that is not."""
    from gputop.probe.steps import StepTracker

    module = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    calls = 200_000
    costs: dict[str, tuple[float, float]] = {}

    def per_call(body: Callable[[StepTracker], None], sampled: bool) -> float:
        tracker = StepTracker()
        tracker.batch_requested(0.0, 1)
        tracker.sampled = sampled
        started = time.perf_counter()
        for _ in range(calls):
            body(tracker)
        return (time.perf_counter() - started) / calls * 1e6

    def boundary(t: StepTracker) -> None:
        now = t.clock()
        t.batch_requested(now, 16)
        t.batch_arrived(now)
        t.optimizer_stepped = True  # every request closes a step

    def forward(t: StepTracker) -> None:
        t.forward_pre(module, ())
        t.forward_post(module, (), None)

    def nested_forward(t: StepTracker) -> None:
        t.forward_depth = 1
        t.forward_pre(module, ())
        t.forward_post(module, (), None)

    def optimizer_step(t: StepTracker) -> None:
        t.optimizer_started()
        t.optimizer_finished(optimizer)

    def phase(t: StepTracker) -> None:  # a backward pass or a collective: entered and left
        t.enter(3)
        t.leave()

    for name, body in (
        ("step boundary (batch requested and arrived, a step closed)", boundary),
        ("forward pre + post hook, outermost module", forward),
        ("forward pre + post hook, nested module", nested_forward),
        ("optimizer step pre + post hook", optimizer_step),
        ("backward / collective wrapper (enter + leave)", phase),
    ):
        costs[name] = (per_call(body, True), per_call(body, False))
    return costs


def flop_count_cost(torch: Any) -> tuple[float, float]:
    """Seconds of the ``anatomy`` model's step, plain (median) and under the FLOP counter (median of 5)."""
    from torch.utils.flop_counter import FlopCounterMode

    layers = [m for _ in range(8) for m in (torch.nn.Linear(128, 128), torch.nn.ReLU())]
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(16, 128)

    def step() -> float:
        started = time.perf_counter()
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - started

    plain = statistics.median(step() for _ in range(200))
    counted = []
    for _ in range(5):
        with FlopCounterMode(display=False):
            counted.append(step())
    return plain, statistics.median(counted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="pairs of passes (with, without) per case")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        assert gputop.probe.install(directory)
        import torch

        torch.set_num_threads(1)
        base = sys.modules[TARGET]._BaseDataLoaderIter
        wrapped = {name: getattr(base, name) for name in WRAPPED}
        original = {name: fn.__wrapped__ for name, fn in wrapped.items()}

        print(f"{'case':<8} {'µs/batch without':>16} {'added µs (IQR)':>22} {'slowdown':>9}")
        for case in args.cases.split(","):
            base_us, added = measure(make_loop(case, CASES[case]), args.pairs, base, wrapped, original)
            added_us = statistics.median(added)
            q1, _, q3 = statistics.quantiles(added, n=4)
            spread = f"{added_us:.2f} ({q1:+.1f}..{q3:+.1f})"
            print(f"{case:<8} {base_us:>16.2f} {spread:>22} {added_us / base_us * 100:>8.2f}%", flush=True)

        walk_us, tensors = tensor_walk_us(torch)
        print(
            f"tensor count: {walk_us:.0f} µs per walk over {tensors} parameters, at most every 5 s: "
            f"{walk_us / 5e6 * 100:.4f}% of the training thread"
        )
        for name, (sampled, plain) in hook_costs(torch).items():
            print(f"{name}: {sampled:.2f} µs per call on a sampled step, {plain:.2f} µs on another")
        plain_s, counted_s = flop_count_cost(torch)
        print(
            f"FLOP count: the counted step takes {counted_s * 1e3:.2f} ms against {plain_s * 1e3:.2f} ms "
            f"({counted_s / plain_s:.1f}x), once"
        )
        probe = gputop.probe.installed()
        writes = []
        for _ in range(200):
            started = time.perf_counter()
            probe.write()
            writes.append((time.perf_counter() - started) * 1e6)
        write_us = statistics.median(writes)
        share = write_us / (probe.interval_s * 1e6) * 100
        print(f"report writer: {write_us:.0f} µs per write, every {probe.interval_s} s: {share:.3f}% of one core")
        print(f"probe failures counted during the run: {probe.failures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
