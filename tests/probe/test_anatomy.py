"""The report's ``"step"`` object from finished steps (``StepWindow``), and a CUDA step's events read back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gputop.model import PHASES, StepAnatomy
from gputop.probe import anatomy
from gputop.probe.phases import DATA, FORWARD, OTHER, PHASE_NAMES, resolve
from gputop.probe.steps import EventPool, StepRecord, StepTracker

pytestmark = pytest.mark.fast

NO_EXTRA = {"syncs_per_step": None, "sync_sites": [], "sync_sampled_steps": 0, "flops_per_step": None}


class FakeEvent:
    """A CUDA event on a fake GPU clock: ``at`` ms once the GPU got there, None while it has not."""

    def __init__(self, at: float | None) -> None:
        self.at = at
        self.recorded = 0

    def record(self) -> None:
        self.recorded += 1

    def query(self) -> bool:
        return self.at is not None

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None, "elapsed_time on an event not complete synchronises"
        return end.at - self.at


def record(end: float, step_s: float, seconds: list[float] | None = None, samples: int | None = 8) -> StepRecord:
    return StepRecord(end, step_s, 1, samples, seconds, None, None)


def window_of(records: list[StepRecord], boundary: str = "DataLoader") -> tuple[StepTracker, anatomy.StepWindow]:
    tracker = StepTracker()
    tracker.boundary = boundary
    tracker.finished.extend(records)
    tracker.steps = len(records)
    return tracker, anatomy.StepWindow()


def report(records: list[StepRecord], now: float, **extra: object) -> dict:
    tracker, window = window_of(records)
    part = window.report(tracker, now, {**NO_EXTRA, "flops_source": None, **extra})
    assert part is not None
    return part


def test_phases_of_the_PHASES_contract_in_its_order():
    assert PHASE_NAMES == PHASES


def test_the_warm_up_is_the_median_of_the_first_steps_and_stays_out_of_the_window():
    warmup = [record(i, s) for i, s in enumerate([5.0, 3.0, 1.0, 1.0, 1.0], 1)]
    steady = [record(5 + i, 0.5) for i in range(1, 5)]

    part = report(warmup + steady, now=10)

    assert (part["warmup_step_s"], part["step_s"], part["window_steps"], part["steps"]) == (1.0, 0.5, 4, 9)


def test_a_step_slowed_by_counting_its_flops_is_left_out_of_the_statistics():
    records = [record(0, 1)] * anatomy.WARMUP_STEPS + [record(1, 0.5), record(2, 0.5), record(3, 0.5)]
    records[-2] = StepRecord(2, 4.5, 1, 8, None, None, None, measured=True)

    part = report(records, now=3)

    assert (part["steps"], part["window_steps"], part["step_p95_s"]) == (8, 2, 0.5)


def test_median_p95_and_rates_of_the_window():
    lengths = [0.1] * 18 + [0.3, 0.5]
    records = [record(0, 1)] * anatomy.WARMUP_STEPS + [record(1 + 0.1 * i, s) for i, s in enumerate(lengths)]

    part = report(records, now=3)

    assert part["step_s"] == 0.1 and part["step_p95_s"] == 0.3
    assert part["steps_per_s"] == pytest.approx(20 / sum(lengths))
    assert part["samples_per_s"] == pytest.approx(8 * 20 / sum(lengths))


def test_phases_are_the_sampled_steps_shares_of_the_mean_step_and_add_up_to_it():
    seconds = [0.0] * len(PHASE_NAMES)
    seconds[DATA], seconds[FORWARD], seconds[OTHER] = 0.25, 0.5, 0.25
    records = [record(0, 1)] * anatomy.WARMUP_STEPS
    records += [record(1, 1.0, seconds), record(2, 3.0), record(3, 2.0)]  # one sampled, two not

    part = report(records, now=3)

    assert part["phases_s"] == {"data": 0.5, "forward": 1.0, "other": 0.5}
    assert sum(part["phases_s"].values()) == pytest.approx(2.0)


def test_drift_is_the_window_median_over_the_first_steady_windows():
    first = [record(0.1 * i, 0.1) for i in range(1, 110)]  # 11 s of 0.1 s steps, then a slower stretch
    later = [record(20 + 0.2 * i, 0.2) for i in range(1, 60)]
    tracker, window = window_of(first)
    window.take(tracker, now=11)
    tracker.finished.extend(later)

    part = window.report(tracker, 32, {**NO_EXTRA, "flops_source": None})

    assert part is not None and part["drift"] == pytest.approx(2.0)


def test_a_loader_without_a_batch_size_has_no_samples_per_s_and_says_why():
    part = report([record(i, 1, samples=None) for i in range(1, 9)], now=9)

    assert part["samples_per_s"] is None and "batch size" in part["unavailable"]["samples_per_s"]


def test_no_step_in_the_window_leaves_the_timing_null_with_the_reason():
    part = report([record(i, 1) for i in range(1, 9)], now=100)

    assert (part["step_s"], part["phases_s"]) == (None, {})
    assert part["unavailable"]["step_s"] == "no step ended in the last 10 s"


def test_the_final_report_looks_back_from_the_last_step_however_long_the_job_went_on_after_it():
    """A job that saves a checkpoint for a minute after its loop: its last report, at exit, still has its steps."""
    tracker, window = window_of([record(0, 1)] * anatomy.WARMUP_STEPS + [record(i, 0.5) for i in range(1, 21)])
    extra = {**NO_EXTRA, "flops_source": None}

    live = window.report(tracker, 80.0, dict(extra))
    final = window.report(tracker, 80.0, dict(extra), final=True)

    assert live is not None and final is not None
    assert live["step_s"] is None  # nothing ended in the last 10 s: true of the job as it is now
    assert (final["window_steps"], final["step_s"]) == (11, 0.5)  # the steps that ended from t=10 to t=20


def test_the_step_object_has_exactly_the_contracts_fields_and_is_finite_json():
    part = report([record(i, 1) for i in range(1, 9)], now=9)

    assert set(part) == {field.name for field in dataclasses.fields(StepAnatomy)}
    json.dumps(part, allow_nan=False)


def test_nothing_is_reported_before_a_step_was_found():
    assert anatomy.StepWindow().report(StepTracker(), 0, {}) is None


# -- CUDA: events on sampled steps, read without waiting -----------------------------------------------------


def test_events_become_seconds_per_phase_from_each_mark_to_the_next():
    marks = [(OTHER, FakeEvent(0.0)), (DATA, FakeEvent(1.0)), (FORWARD, FakeEvent(4.0)), (OTHER, FakeEvent(10.0))]

    seconds = resolve(marks)

    assert seconds is not None
    assert dict(zip(PHASE_NAMES, seconds)) == pytest.approx(
        {"data": 0.003, "h2d": 0, "forward": 0.006, "backward": 0, "optimizer": 0, "collective": 0, "other": 0.001}
    )


def test_a_step_whose_events_the_gpu_has_not_reached_is_read_later_never_waited_for():
    marks = [(OTHER, FakeEvent(0.0)), (FORWARD, FakeEvent(None))]

    assert resolve(marks) is None
    marks[1][1].at = 5.0
    assert resolve(marks) == pytest.approx([0, 0, 0, 0, 0, 0, 0.005])


def test_a_sampled_cuda_step_records_an_event_at_each_change_of_phase_from_a_pool():
    clock_now = [0.0]
    tracker = StepTracker(lambda: clock_now[0])
    made: list[FakeEvent] = []
    tracker.events = EventPool(lambda: made.append(FakeEvent(float(len(made)))) or made[-1])
    tracker.batch_requested(0.0, 1)
    tracker.batch_arrived(0.0)
    tracker.forward_pre("model", ())
    tracker.forward_post("model", (), None)
    tracker.batch_requested(0.0, 1)

    (step,) = tracker.finished
    assert step.marks is not None
    assert [phase for phase, _ in step.marks] == [OTHER, DATA, OTHER, FORWARD, OTHER, OTHER]
    window = anatomy.StepWindow()
    window.steps = anatomy.WARMUP_STEPS  # past the warm-up
    part = window.report(tracker, 0.0, {**NO_EXTRA, "flops_source": None})
    assert part is not None and part["clock"] == "cuda"
    assert list(part["phases_s"]) == ["data", "forward", "other"]  # one GPU ms from each event to the next
    assert len(tracker.events.free) == len(made) == 6  # read, and given back to the pool


def test_events_of_a_step_are_kept_until_complete_then_used_in_place_of_the_hosts_seconds():
    tracker = StepTracker()
    tracker.boundary = "DataLoader"
    tracker.events = EventPool(lambda: FakeEvent(None))
    late = FakeEvent(None)
    marks = [(OTHER, FakeEvent(0.0)), (FORWARD, FakeEvent(2.0)), (OTHER, late)]
    host = [0.0] * len(PHASE_NAMES)
    host[OTHER] = 9.0
    tracker.finished.append(StepRecord(1.0, 0.01, 1, 1, host, marks, None))
    window = anatomy.StepWindow()
    window.steps = anatomy.WARMUP_STEPS

    first = window.report(tracker, 1.0, {**NO_EXTRA, "flops_source": None})
    late.at = 10.0
    second = window.report(tracker, 1.0, {**NO_EXTRA, "flops_source": None})

    assert first is not None and second is not None
    assert first["phases_s"] == {}
    assert second["phases_s"] == pytest.approx({"forward": 0.008, "other": 0.002})
