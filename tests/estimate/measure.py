"""A real training step on the CPU and its peak memory, as the CPU allocator reported it to ``torch.profiler``:
the measurement ``gputop estimate`` is checked against. It shares no code with the estimate: the model and the
batch are real, the loop is written out here, and the bytes are the allocator's."""

from __future__ import annotations

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from tests.estimate.families import Factory


def measured_peak(factory: Factory, batch_size: int, steps: int = 2) -> int:
    """The most bytes the CPU allocator held at once while building the model and a batch and running ``steps``
    training steps (forward, the mean as the loss or the model's own given labels, backward, Adam with the
    multi-tensor implementation, gradients set to None)."""
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model, make_batch = factory()
        batch = make_batch(batch_size)
        optimizer = torch.optim.Adam(model.parameters(), foreach=True)
        for _ in range(steps):
            if isinstance(batch, dict):  # a Hugging Face model's keyword arguments, labels among them: its loss
                model(**batch).loss.backward()
            else:
                model(batch).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        del model, batch, optimizer
    return _peak(prof)


def _peak(prof: profile) -> int:
    """The peak of the running sum of the profile's CPU allocations and frees, counting only frees of memory
    allocated while profiling (the allocator's own running total also counts memory from before)."""
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())  # type: ignore[union-attr]
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.typed[0] == _EventType.Allocation and event.typed[1].device.type == "cpu":
            events.append((event.start_time_ns, event.typed[1]))
    events.sort(key=lambda e: e[0])
    live: dict[int, int] = {}
    now = peak = 0
    for _, allocation in events:
        if allocation.alloc_size > 0:
            live[allocation.ptr] = allocation.alloc_size
            now += allocation.alloc_size
            peak = max(peak, now)
        elif allocation.ptr in live:
            now -= live.pop(allocation.ptr)
    return peak
