"""Autocast as the probe sees it, with real torch modules and torch's real forward hooks: a loop that enters
autocast only around its forward (the usual ``with torch.autocast(...): loss = model(x)``) is under autocast."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gputop.probe import phase_hooks
from gputop.probe.precision import PrecisionReader
from gputop.probe.steps import StepTracker

torch = pytest.importorskip("torch")


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StepTracker, PrecisionReader]]:
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)  # install wraps it: put it back after
    tracker, reader = StepTracker(), PrecisionReader()
    phase_hooks.install(tracker, lambda where, exc: pytest.fail(f"{where}: {exc}"), reader.in_forward)
    yield tracker, reader
    tracker.forward_hooks(False)


def cuda_autocast(on: bool) -> None:
    # The thread's CUDA autocast flag, which torch.autocast("cuda") sets; settable without a GPU.
    torch.set_autocast_enabled("cuda", on)


def step(tracker: StepTracker, model: Any, autocast_in_forward: bool) -> None:
    tracker.batch_requested(0.0, 1)  # the first step is sampled: its forward is timed
    cuda_autocast(autocast_in_forward)
    try:
        model(torch.ones(2, 4))
    finally:
        cuda_autocast(False)


def test_autocast_entered_only_around_the_forward_is_seen(hooked: tuple[StepTracker, PrecisionReader]) -> None:
    tracker, reader = hooked
    reader.read(0.0, lambda *a: None)  # at the batch boundary: outside autocast
    step(tracker, torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), autocast_in_forward=True)

    assert reader.report()["autocast"] is True


def test_a_forward_outside_autocast_reads_false(hooked: tuple[StepTracker, PrecisionReader]) -> None:
    tracker, reader = hooked
    reader.read(0.0, lambda *a: None)
    step(tracker, torch.nn.Linear(4, 4), autocast_in_forward=False)

    assert reader.report()["autocast"] is False


def test_nothing_read_yet_is_unknown() -> None:
    assert PrecisionReader().report()["autocast"] is None
