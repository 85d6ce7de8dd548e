"""The wrappers the step's phases are timed with, on stand-ins for torch's objects: copies to the GPU with their
bytes, pinning and ``non_blocking``; and a probe whose own work fails never failing the job's call."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gputop.probe.copies import non_blocking_of, to_cuda, wrap_copies
from gputop.probe.phase_hooks import wrap_phase
from gputop.probe.phases import COLLECTIVE, H2D, PHASE_NAMES
from gputop.probe.steps import StepTracker

pytestmark = pytest.mark.fast


class Tensor:
    """What the copy wrappers use of ``torch.Tensor``."""

    def __init__(self, cuda: bool = False, pinned: bool = False, numel: int = 256) -> None:
        self.is_cuda, self.pinned, self.count = cuda, pinned, numel

    def numel(self) -> int:
        return self.count

    def element_size(self) -> int:
        return 4

    def is_pinned(self) -> bool:
        return self.pinned

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        return Tensor(to_cuda(args, kwargs, Tensor), self.pinned, self.count)

    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        return Tensor(True, self.pinned, self.count)

    def copy_(self, src: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self


@pytest.fixture
def tracker() -> StepTracker:
    tracker = StepTracker()
    tracker.batch_requested(0.0, 1)  # the first step is sampled
    return tracker


@pytest.fixture
def tensor_type(tracker: StepTracker) -> type[Tensor]:
    cls = type("Tensor", (Tensor,), {})
    wrap_copies(SimpleNamespace(Tensor=cls), tracker, lambda *_: pytest.fail("the probe failed"), lambda: False)
    return cls


@pytest.mark.parametrize(
    ("args", "kwargs", "cuda"),
    [
        (("cuda",), {}, True),
        (("cuda:1",), {}, True),
        ((0,), {}, True),
        (("cpu",), {}, False),
        ((), {"device": "cuda"}, True),
        ((Tensor(cuda=True),), {}, True),
        ((Tensor(),), {}, False),
        (("float16",), {}, False),
        ((True,), {}, False),
    ],
)
def test_a_copy_to_cuda_is_told_from_the_arguments_of_to(args, kwargs, cuda):
    assert to_cuda(args, kwargs, Tensor) is cuda


def test_non_blocking_is_read_by_name_or_position():
    assert non_blocking_of(("cuda",), {"non_blocking": True})
    assert non_blocking_of(("cuda", None, True), {})
    assert not non_blocking_of(("cuda",), {})


def test_copies_to_the_gpu_count_their_bytes_and_how_they_were_made(tracker, tensor_type):
    tensor_type(pinned=True).to("cuda", non_blocking=True)
    tensor_type().cuda()
    tensor_type(cuda=True).copy_(tensor_type(numel=512))

    assert tracker.h2d == [1024 + 1024 + 2048, 1024 + 2048, 1024 + 2048]
    assert tracker.seconds[H2D] >= 0 and tracker.current != H2D


def test_copies_that_stay_on_the_host_or_the_gpu_are_not_counted(tracker, tensor_type):
    tensor_type().to("cpu")
    tensor_type().to("float16")
    tensor_type(cuda=True).to("cuda")
    tensor_type(cuda=True).copy_(tensor_type(cuda=True))
    tensor_type().copy_(tensor_type())

    assert tracker.h2d == [0, 0, 0]


def test_a_probe_that_fails_inside_a_wrapper_never_fails_the_jobs_call(tracker):
    failures: list[str] = []

    def broken(*_: Any) -> None:
        raise RuntimeError("probe bug")

    tracker.enter = broken  # type: ignore[method-assign]
    wrapped = wrap_phase(lambda x: x * 2, COLLECTIVE, tracker, lambda where, exc: failures.append(where), lambda: False)

    assert wrapped(21) == 42
    assert failures == ["collective"]


def test_the_jobs_own_exception_goes_through_a_wrapper_unchanged_and_the_phase_ends(tracker):
    def all_reduce() -> None:
        raise ValueError("rank 1 went away")

    wrapped = wrap_phase(all_reduce, COLLECTIVE, tracker, lambda *_: pytest.fail("the probe failed"), lambda: False)

    with pytest.raises(ValueError, match="rank 1 went away"):
        wrapped()
    assert PHASE_NAMES[tracker.current] == "data" and tracker.stack == []


def test_while_dynamo_traces_a_wrapper_it_only_calls_torchs_function(tracker):
    wrapped = wrap_phase(lambda: "done", COLLECTIVE, tracker, lambda *_: None, lambda: True)

    assert wrapped() == "done"
    assert tracker.seconds[COLLECTIVE] == 0 and tracker.stack == []
