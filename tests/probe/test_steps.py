"""``StepTracker`` with a clock the test moves: where steps begin and end, and which phase each second goes to."""

from __future__ import annotations

import itertools

import pytest

from gputop.probe import steps as steps_module
from gputop.probe.phases import PHASE_NAMES
from gputop.probe.steps import StepTracker

pytestmark = pytest.mark.fast


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tracker(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> StepTracker:
    monkeypatch.setattr(steps_module, "SAMPLE_EVERY", 1)  # every step sampled
    return StepTracker(clock)


def phases(record: steps_module.StepRecord) -> dict[str, float]:
    assert record.seconds is not None
    return {name: round(s, 6) for name, s in zip(PHASE_NAMES, record.seconds) if s}


def train_step(
    tracker: StepTracker, clock: Clock, optimizer: object, data: float = 1, fwd: float = 2, bwd: float = 3
) -> None:
    """One batch: requested, waited for ``data`` s, forward, backward, optimizer step (1 s), 0.5 s of the loop."""
    tracker.batch_requested(clock.now, 4)
    clock.now += data
    tracker.batch_arrived(clock.now)
    micro_batch(tracker, clock, fwd, bwd)
    tracker.optimizer_started()
    clock.now += 1
    tracker.optimizer_finished(optimizer)
    clock.now += 0.5


def micro_batch(tracker: StepTracker, clock: Clock, fwd: float, bwd: float) -> None:
    tracker.forward_pre(None, ())
    clock.now += fwd
    tracker.forward_post(None, (), None)
    tracker.enter(PHASE_NAMES.index("backward"))
    clock.now += bwd
    tracker.leave()


def test_a_step_runs_from_one_batch_request_to_the_next_and_its_phases_add_up_to_it(tracker, clock):
    optimizer = object()
    train_step(tracker, clock, optimizer)
    train_step(tracker, clock, optimizer)

    (first,) = tracker.finished

    assert first.step_s == 7.5
    assert phases(first) == {"data": 1, "forward": 2, "backward": 3, "optimizer": 1, "other": 0.5}
    assert (first.batches, first.samples, tracker.boundary) == (1, 4, "DataLoader")


def test_only_the_outermost_module_call_is_the_forward_phase(tracker, clock):
    tracker.batch_requested(clock.now, 1)
    tracker.batch_arrived(clock.now)
    tracker.forward_pre("model", ())
    clock.now += 1
    tracker.forward_pre("layer", ())  # nested: counts depth only
    clock.now += 2
    tracker.forward_post("layer", (), None)
    clock.now += 1
    tracker.forward_post("model", (), None)
    clock.now += 1
    tracker.batch_requested(clock.now, 1)

    assert phases(tracker.finished[0]) == {"forward": 4, "other": 1}


def test_a_collective_inside_the_forward_pass_is_taken_out_of_it(tracker, clock):
    tracker.batch_requested(clock.now, 1)
    tracker.batch_arrived(clock.now)
    tracker.forward_pre("model", ())
    clock.now += 1
    tracker.enter(PHASE_NAMES.index("collective"))
    clock.now += 3
    tracker.leave()
    clock.now += 1
    tracker.forward_post("model", (), None)
    tracker.batch_requested(clock.now, 1)

    assert phases(tracker.finished[0]) == {"forward": 2, "collective": 3}


def test_a_forward_run_again_inside_the_backward_pass_stays_backward(tracker, clock):
    # activation checkpointing recomputes the forward of a block while the backward pass runs
    tracker.batch_requested(clock.now, 1)
    tracker.batch_arrived(clock.now)
    tracker.enter(PHASE_NAMES.index("backward"))
    tracker.forward_pre("block", ())
    clock.now += 2
    tracker.forward_post("block", (), None)
    clock.now += 1
    tracker.leave()
    tracker.batch_requested(clock.now, 1)

    assert phases(tracker.finished[0]) == {"backward": 3}


def test_ddp_gradients_ready_turn_the_rest_of_the_backward_pass_into_collective_wait(tracker, clock):
    tracker.batch_requested(clock.now, 1)
    tracker.batch_arrived(clock.now)
    tracker.enter(PHASE_NAMES.index("backward"))
    clock.now += 2
    tracker.gradients_ready()
    clock.now += 5
    tracker.leave()
    tracker.batch_requested(clock.now, 1)

    assert phases(tracker.finished[0]) == {"backward": 2, "collective": 5}


def test_with_gradient_accumulation_the_batches_up_to_the_optimizer_step_are_one_step(tracker, clock):
    optimizer = object()
    for _ in range(3):  # three steps of 4 micro-batches
        for micro in range(4):
            tracker.batch_requested(clock.now, 8)
            clock.now += 1
            tracker.batch_arrived(clock.now)
            micro_batch(tracker, clock, 2, 3)
            if micro == 3:
                tracker.optimizer_started()
                clock.now += 1
                tracker.optimizer_finished(optimizer)
    tracker.batch_requested(clock.now, 8)

    last = tracker.finished[-1]
    # Before the first optimizer step a batch is a step of its own: 3 single ones, then 3 whole steps.
    assert [r.batches for r in tracker.finished] == [1, 1, 1, 1, 4, 4]
    assert (last.step_s, last.samples) == (25, 32)
    assert phases(last) == {"data": 4, "forward": 8, "backward": 12, "optimizer": 1}


def test_batches_without_an_optimizer_step_after_training_become_steps_of_their_own(tracker, clock):
    optimizer = object()
    for _ in range(3):
        train_step(tracker, clock, optimizer)
    for _ in range(6):  # a validation loop: forward only
        tracker.batch_requested(clock.now, 4)
        clock.now += 1
    tracker.batch_requested(clock.now, 4)

    # Past twice the batches an optimizer step took (one), each batch closes a step.
    assert [r.batches for r in tracker.finished] == [1, 1, 1, 3, 1, 1, 1]


def test_without_a_dataloader_a_step_ends_with_the_lead_optimizers_step(tracker, clock):
    generator, discriminator = object(), object()
    for _ in range(4):  # a GAN's loop: two optimizers stepped per turn
        for optimizer in (discriminator, generator):
            micro_batch(tracker, clock, 1, 1)
            tracker.optimizer_started()
            clock.now += 1
            tracker.optimizer_finished(optimizer)

    assert tracker.boundary == "optimizer step"
    assert [r.step_s for r in tracker.finished] == [6, 6, 6]
    assert phases(tracker.finished[-1]) == {"forward": 2, "backward": 2, "optimizer": 2}
    assert tracker.finished[-1].samples == 0  # no batch size without a DataLoader


def test_a_step_that_is_not_sampled_has_its_length_and_no_phases(clock):
    tracker = StepTracker(clock)
    for _ in range(4):  # steps far shorter than the gap between sampled steps
        tracker.batch_requested(clock.now, 1)
        clock.now += 0.001
        tracker.batch_arrived(clock.now)
        micro_batch(tracker, clock, 0.001, 0.001)

    assert [r.seconds is not None for r in tracker.finished] == [True, False, False]
    assert all(r.step_s > 0 for r in tracker.finished)


def test_the_forward_hooks_are_in_place_only_for_sampled_steps(clock):
    tracker = StepTracker(clock)
    switched: list[bool] = []
    tracker.forward_hooks = switched.append
    for _ in range(2 * steps_module.SAMPLE_EVERY):  # the gap to the next sampled step is at most 1.5 of it
        tracker.batch_requested(clock.now, 1)
        clock.now += 0.001

    assert switched[:4] == [True, False, True, False]
    assert all(on != then for on, then in itertools.pairwise(switched))  # on for one step, off after it


def test_instruments_measure_exactly_one_step(tracker, clock):
    class Instrument:
        def __init__(self) -> None:
            self.calls: list[tuple[str, float]] = []

        next_due = 2

        def due(self, steps: int) -> bool:
            if steps < self.next_due:
                return False
            self.next_due = steps_module.NEVER
            return True

        def begin(self) -> None:
            self.calls.append(("begin", clock.now))

        def end(self) -> None:
            self.calls.append(("end", clock.now))

    instrument = Instrument()
    tracker.instruments = [instrument]
    for _ in range(5):
        tracker.batch_requested(clock.now, 1)
        clock.now += 1

    assert instrument.calls == [("begin", 102.0), ("end", 103.0)]
    assert [r.measured for r in tracker.finished] == [False, False, True, False]
    assert tracker.finished[2].seconds is None  # slowed by what measured it: no phases from it


def test_sampled_steps_fall_on_every_point_of_a_loops_cycle(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two workers: the batch of one comes late (1 s), the other's is ready at once, turn by turn. Sampling one step
    # in a fixed 16 would time only one of the two, and put the loop's data wait at 0 or at twice its mean.
    monkeypatch.setattr(steps_module, "SAMPLE_GAP_S", 1e9)  # by count alone
    tracker = StepTracker(clock)
    for n in range(1600):
        train_step(tracker, clock, optimizer=object(), data=1.0 if n % 2 else 0.0)

    sampled = [r for r in tracker.finished if r.seconds is not None]
    data = [r.seconds[PHASE_NAMES.index("data")] for r in sampled]
    assert len(sampled) >= 20
    assert 0.3 < sum(data) / len(data) < 0.7  # the true mean is 0.5 s
