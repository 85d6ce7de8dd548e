"""The engine's hysteresis: a finding is raised after its condition held for a window, cleared after it stopped
for one, and does not flicker in between; all of it timed by the snapshots alone."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Iterator

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor import thresholds as th
from gputop.advisor.engine import _RuleState
from gputop.advisor.rules import Finding, Rule
from gputop.advisor.window import MAX_HISTORY_SAMPLES, JobWindow
from gputop.limits import MIN_INTERVAL_S
from gputop.model import (
    HEALTH_CRITICAL,
    HEALTH_OK,
    INFO,
    NO_PROCESS,
    WARNING,
    Advice,
    Gpu,
    GpuHealth,
    Snapshot,
    TrainingView,
)
from tests.advisor.build import PID, gpu, loader, row, snapshot, view, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

WINDOW_S = 10.0
EVERY_S = 0.5
FINDING = Finding(INFO, "title", "detail", "action", "external", {"n": 1})


def advisor_with(holds: Callable[[float], bool], pid: int | None = PID) -> Advisor:
    """An advisor of ``pid`` with one rule, which holds at the snapshot times ``holds`` says."""
    advisor = Advisor(pid, AdvisorConfig(window_s=WINDOW_S))
    advisor.rules = (Rule("test-rule", lambda w, config: FINDING if holds(w.latest.time) else None),)
    return advisor


def feed(advisor: Advisor, start: float, end: float, training: TrainingView | None = None) -> dict[float, bool]:
    """Snapshots every 0.5 s from ``start`` to ``end``; returns whether the rule was active after each."""
    states = {}
    t = start
    while t <= end + 1e-9:
        states[t] = bool(advisor.update(snapshot(t, training or view())))
        t = round(t + EVERY_S, 6)
    return states


def first_change(states: dict[float, bool], to: bool) -> float | None:
    return next((t for t, active in states.items() if active is to), None)


def test_a_finding_is_raised_once_its_condition_has_held_for_a_window():
    states = feed(advisor_with(lambda t: True), 0, 20)

    assert first_change(states, True) == WINDOW_S


def test_a_condition_that_starts_late_is_raised_a_window_after_it_starts():
    states = feed(advisor_with(lambda t: t >= 30), 0, 60)

    # The tick at 30 s speaks for the half second before it: the condition holds from 29.5 s.
    raised = first_change(states, True)
    assert 29.5 + 0.8 * WINDOW_S <= raised <= 29.5 + WINDOW_S


def test_a_finding_clears_once_its_condition_has_stopped_for_most_of_a_window():
    states = feed(advisor_with(lambda t: t < 30), 0, 60)

    # The last tick that held, at 29.5 s, speaks for the half second before it: the condition stops at 29.5 s.
    cleared = next(t for t, active in states.items() if t > 30 and not active)
    assert 29.5 + 0.8 * WINDOW_S <= cleared <= 29.5 + WINDOW_S
    assert all(states[t] for t in states if WINDOW_S <= t < cleared)


def test_a_condition_holding_every_other_tick_neither_raises_nor_clears_a_finding():
    flickering = feed(advisor_with(lambda t: int(t / EVERY_S) % 2 == 0), 0, 60)
    assert not any(flickering.values())

    advisor = advisor_with(lambda t: t < 20 or int(t / EVERY_S) % 2 == 0)
    states = feed(advisor, 0, 80)
    assert all(states[t] for t in states if t >= WINDOW_S), "raised once, a half-held condition keeps it"


def test_one_odd_tick_in_a_window_does_not_hold_a_finding_off():
    states = feed(advisor_with(lambda t: t != 5.0), 0, 20)

    assert first_change(states, True) == WINDOW_S


def test_the_finding_keeps_the_time_it_was_raised_and_shows_the_latest_measurements():
    counter = iter(range(1000))
    advisor = Advisor(PID, AdvisorConfig(window_s=WINDOW_S))
    advisor.rules = (
        Rule("test-rule", lambda w, config: Finding(WARNING, "t", "d", "a", "probe", {"n": next(counter)})),
    )

    feed(advisor, 0, 15)

    (advice,) = advisor.active
    assert (advice.id, advice.pid, advice.since, advice.severity) == ("test-rule", PID, WINDOW_S, WARNING)
    assert advice.evidence["n"] == 30


def test_time_comes_from_the_snapshots_so_a_replay_gives_the_same_findings():
    def starving(t: float) -> TrainingView:
        return view(loader(wait=0.6 if t >= 5 else 0.0, workers=2), workers(2))

    snapshots = [snapshot(1_700_000_000 + n * 0.7, starving(n * 0.7), (gpu(busy=30),), (row(),)) for n in range(60)]
    live, replay = Advisor(PID, AdvisorConfig(window_s=5)), Advisor(PID, AdvisorConfig(window_s=5))

    seen_live = [live.update(s) for s in snapshots]
    seen_replay = [replay.update(s) for s in snapshots]

    assert seen_live == seen_replay
    found = {a.id: a for a in seen_live[-1]}
    assert sorted(found) == ["data-starved", "pin-memory-off"]
    assert found["data-starved"].suggest == {"num_workers": 7}  # 2 / (1 - 0.6) × 1.25 = 6.25


def test_a_process_that_ends_takes_its_findings_out_of_the_active_ones_but_not_out_of_the_report():
    advisor = advisor_with(lambda t: True)
    feed(advisor, 0, 15)

    assert advisor.update(snapshot(16.0, view(pid=1))) == ()

    ((advice, active),) = advisor.raised()
    assert (advice.id, active) == ("test-rule", False)


def test_with_a_pid_only_that_job_and_its_ranks_are_judged():
    agent = TrainingView(pid=PID, ranks=(PID + 1, PID + 2))
    ranks = [view(pid=PID + 1), view(pid=PID + 2)]
    stranger = view(pid=999)
    advisor = advisor_with(lambda t: True)

    for n in range(25):
        advisor.update(dataclasses.replace(snapshot(n * EVERY_S, agent), training=(agent, *ranks, stranger)))

    # The agent shows no training evidence of its own; the finding holds on both ranks: one finding of the job.
    (found,) = advisor.active
    assert (found.pid, found.pids, found.job is not None) == (PID + 1, (PID + 1, PID + 2), True)


def test_watching_every_process_the_findings_of_ended_processes_are_forgotten():
    advisor = advisor_with(lambda t: True, pid=None)  # as the exporter watches a machine
    feed(advisor, 0, 15)

    advisor.update(snapshot(16.0, view(pid=1)))

    assert advisor.raised() == ()


def _share_summed_anew(evaluations: list[tuple[float, bool]], hold_s: float) -> float | None:
    """The held share of the last ``hold_s`` as a fresh walk over every evaluation gives it."""
    now = evaluations[-1][0]
    start = now - hold_s
    # Dropped from the front: every evaluation up to the last one before the first after the window's start.
    first = next((n - 1 for n in range(1, len(evaluations)) if evaluations[n][0] > start), len(evaluations) - 1)
    kept = evaluations[first:]
    if kept[0][0] > start:
        return None
    held_s, previous = 0.0, kept[0][0]
    for at, holds in kept[1:]:
        if holds:
            held_s += at - max(previous, start)
        previous = at
    return held_s / hold_s if hold_s > 0 else float(evaluations[-1][1])


STEPS_S = (0.1, 0.5, 1.0, 0.7, 4.0, 25.0)


@pytest.mark.parametrize("seed", range(8))
def test_the_held_share_kept_tick_by_tick_is_the_share_summed_anew(seed: int):
    rng = random.Random(seed)
    state = _RuleState()
    seen: list[tuple[float, bool]] = []
    recent = 2 * int(WINDOW_S / min(STEPS_S))  # twice what a window holds: all the fresh sum looks at
    t = rng.choice((0.0, 1_800_000_000.0))
    for _ in range(3000):
        t += rng.choice(STEPS_S)
        held = rng.random() < 0.7
        seen.append((t, held))
        share = state.record(t, held, WINDOW_S)
        expected = _share_summed_anew(seen[-recent:], WINDOW_S)
        assert (share is None) == (expected is None)
        if share is not None and expected is not None:
            assert share == pytest.approx(expected, abs=1e-12)
            for threshold in (th.FIRE_SHARE, th.CLEAR_SHARE):
                assert (share >= threshold) == (expected >= threshold)
                assert (share <= threshold) == (expected <= threshold)


def test_a_held_share_at_a_threshold_is_the_share_summed_anew_to_the_last_bit():
    state = _RuleState()
    seen = [(t / 10, t % 5 != 0) for t in range(1, 400)]  # 4 ticks of 5 held: 0.8 of the window, give or take rounding
    shares = [state.record(t, held, 1.0) for t, held in seen]

    for n in range(20, len(seen)):
        expected = _share_summed_anew(seen[: n + 1], 1.0)
        assert expected == pytest.approx(th.FIRE_SHARE)
        assert shares[n] == expected


def test_evaluations_whose_time_goes_back_are_shared_as_a_fresh_sum_gives():
    state = _RuleState()
    seen: list[tuple[float, bool]] = []
    for n, t in enumerate([0.0, 1.0, 2.0, 3.0, 2.5, 4.0, 5.0, 12.0, 11.0, 13.0, 14.0, 30.0, 31.0]):
        seen.append((t, n % 3 != 0))
        assert state.record(t, n % 3 != 0, 5.0) == _share_summed_anew(seen, 5.0)


def _kept(state: _RuleState) -> tuple[object, ...]:
    """Everything a rule's state keeps, with the unheld evaluations it put off made."""
    if state.pending:
        state._take_pending()
    return (list(state.evaluations), state.held_s, state._recount, state._inversions, state.run_from)


@pytest.mark.parametrize("seed", range(40))
def test_unheld_evaluations_put_off_leave_the_state_that_adding_them_one_by_one_leaves(seed: int):
    rng = random.Random(seed)
    hold_s = rng.choice((0.0, 3.0, 7.3, WINDOW_S))
    put_off, added = _RuleState(), _RuleState()
    t = rng.choice((0.0, 1_800_000_000.0))
    for n in range(600):
        t += rng.choice((*STEPS_S, 0.0, rng.uniform(0.0, 2.0), -2.0 if rng.random() < 0.05 else 0.3))
        step = rng.random()
        if step < 0.8:  # nothing found, nothing raised: the engine's usual evaluation
            put_off.add_unheld(t, hold_s)
            added.add(t, False, hold_s)
        elif step < 0.95:
            held = rng.random() < 0.5
            assert put_off.record(t, held, hold_s) == added.record(t, held, hold_s)
        else:
            assert put_off.settled(t, hold_s) == added.settled(t, hold_s)
        if n % 50 == 0:
            assert _kept(put_off) == _kept(added)  # the running total to the last bit, and the countdown to its sum
    assert _kept(put_off) == _kept(added)


def test_a_finding_that_does_not_change_keeps_its_advice_and_the_active_findings():
    readings = {"n": 1}
    advisor = Advisor(PID, AdvisorConfig(window_s=WINDOW_S))
    advisor.rules = (Rule("test-rule", lambda w, config: Finding(INFO, "t", "d", "a", "external", dict(readings))),)
    feed(advisor, 0, 12)
    before = advisor.active

    advisor.update(snapshot(12.5, view()))
    assert advisor.active is before and advisor.active[0] is before[0]

    readings["n"] = 2
    advisor.update(snapshot(13.0, view()))
    (advice,) = advisor.active
    assert advice.evidence == {"n": 2} and advice.since == before[0].since


# -- the bound on a history: by time and by count ---------------------------------------------------------------


def counting_advisor(config: AdvisorConfig) -> tuple[Advisor, list[int]]:
    """An advisor whose one rule holds always and notes the samples of each window it judges."""
    judged: list[int] = []

    def check(w: JobWindow, config: AdvisorConfig) -> Finding:
        judged.append(len(w.samples))
        return FINDING

    advisor = Advisor(PID, config)
    advisor.rules = (Rule("test-rule", check),)
    return advisor, judged


def at_times(times: Iterable[float]) -> Iterator[Snapshot]:
    """``snapshot(t, view())`` at each time, made of the same parts (a test feeds tens of thousands)."""
    base = snapshot(0.0, view())
    for t in times:
        yield Snapshot(t, base.host, base.driver, (), (), base.host_processes, training=base.training)


def test_snapshots_closer_than_the_gap_are_not_judged_and_the_findings_stand():
    config = AdvisorConfig(window_s=2.0)
    advisor, judged = counting_advisor(config)

    found = [advisor.update(s) for s in at_times(n / 1000 for n in range(20_000))]  # 20 s of rows 1 ms apart

    assert len(judged) == len(range(0, 20_000, math.ceil(config.min_gap_s * 1000)))
    assert max(judged) <= MAX_HISTORY_SAMPLES
    assert found[-1] == found[-2] and found[-1][0].since >= config.window_s


def test_every_snapshot_the_fastest_sampler_takes_is_judged():
    advisor, judged = counting_advisor(AdvisorConfig())

    for s in at_times(n * MIN_INTERVAL_S for n in range(1200)):
        advisor.update(s)

    assert len(judged) == 1200


def test_a_history_whose_time_goes_back_and_forth_keeps_at_most_its_count_of_samples():
    times = [n * 10.0 for n in range(MAX_HISTORY_SAMPLES + 500)]
    random.Random(3).shuffle(times)
    advisor, judged = counting_advisor(AdvisorConfig())

    for s in at_times(times):
        advisor.update(s)

    assert len(judged) == len(times)  # each one far from the others: none is thinned
    assert max(judged) == MAX_HISTORY_SAMPLES


def test_times_that_go_back_and_forth_are_thinned_against_every_time_judged():
    config = AdvisorConfig(window_s=2.0)
    advisor, judged = counting_advisor(config)

    # Two interleaved runs of rows 1 ms apart, a thousand seconds between them.
    for s in at_times(n / 1000 + (1000.0 if n % 2 else 0.0) for n in range(6000)):
        advisor.update(s)

    assert len(judged) <= 2 * (6 / config.min_gap_s + 1)


def test_a_rule_keeps_at_most_its_count_of_evaluations_when_their_time_goes_back_and_forth():
    times = [n * 10.0 for n in range(MAX_HISTORY_SAMPLES + 500)]
    random.Random(4).shuffle(times)
    state = _RuleState()

    for t in times:
        state.record(t, True, 1e9)

    assert len(state.evaluations) == MAX_HISTORY_SAMPLES


def test_evaluations_in_order_again_after_time_went_back_are_shared_as_a_fresh_sum_gives():
    state = _RuleState()
    seen: list[tuple[float, bool]] = []
    times = [n * 0.5 for n in range(40)] + [15.0] + [20.0 + n * 0.5 for n in range(200)]
    shares = [(t, state.record(t, n % 4 != 0, 5.0), seen.append((t, n % 4 != 0))) for n, t in enumerate(times)]

    for n, (t, share, _) in enumerate(shares):
        if t > 25.0:  # the evaluation at 15 s has left the window: they are in order again
            assert share == pytest.approx(_share_summed_anew(seen[: n + 1], 5.0), abs=1e-12)


def starved_for(waits: Callable[[float], float], seconds: float) -> list[tuple[Advice, ...]]:
    """The findings after each snapshot of a job with one worker whose loop waits ``waits(t)`` of each step."""
    advisor = Advisor(PID, AdvisorConfig(window_s=5))
    found = []
    for n in range(int(seconds / 0.5)):
        t = n * 0.5
        training = view(loader(wait=waits(t), workers=1), workers(1))
        found.append(advisor.update(snapshot(1_700_000_000 + t, training, (gpu(busy=30),), (row(),))))
    return found


def suggested_workers(found: Iterable[tuple[Advice, ...]]) -> list[int]:
    return [a.suggest["num_workers"] for advice in found for a in advice if a.id == "data-starved"]


def test_the_suggested_workers_stay_one_value_while_the_wait_moves_within_the_noise():
    # The loop's wait wanders between 85 % and 89 %: 1 × T / C × 1.25 would say 9, 10 or 11 from one tick to the
    # next. The first value stands: each is within a quarter of it.
    found = starved_for(lambda t: 0.87 + 0.02 * math.sin(t), 60)

    assert set(suggested_workers(found)) == {suggested_workers(found)[0]}
    assert len(suggested_workers(found)) > 80
    last = next(a for a in found[-1] if a.id == "data-starved")
    assert last.evidence["needed_workers"] == last.suggest["num_workers"]


def test_a_new_value_replaces_the_suggestion_once_the_wait_changes_beyond_the_noise():
    # 86 % asks for 9 workers; at 95 % the loop would need 25: far beyond a quarter of 9.
    found = starved_for(lambda t: 0.86 if t < 30 else 0.95, 60)

    assert suggested_workers(found)[0] == 9 and suggested_workers(found)[-1] == 25


def unwell(index: int, state: str = HEALTH_CRITICAL) -> Gpu:
    causes = ("Xid 79: the GPU has fallen off the bus",) if state != HEALTH_OK else ()
    return dataclasses.replace(gpu(busy=0.0, used_gib=0), index=index, health=GpuHealth(state=state, causes=causes))


def test_an_unhealthy_gpu_with_no_process_on_it_is_found_as_the_gpu_alone():
    advisor = Advisor()
    snap = snapshot(100.0, view(), gpus=(gpu(), unwell(1)))

    (finding,) = advisor.update(snap)

    assert (finding.id, finding.severity, finding.subject) == ("gpu-unhealthy", "critical", "GPU 1")
    assert finding.evidence["gpu_index"] == 1 and finding.pid == NO_PROCESS


def test_an_idle_gpus_finding_clears_when_it_is_healthy_again_and_is_not_judged_watching_one_job():
    advisor = Advisor()
    assert len(advisor.update(snapshot(100.0, view(), gpus=(gpu(), unwell(1))))) == 1

    assert advisor.update(snapshot(101.0, view(), gpus=(gpu(), unwell(1, HEALTH_OK)))) == ()
    assert Advisor(PID).update(snapshot(100.0, view(), gpus=(gpu(), unwell(1)))) == ()
