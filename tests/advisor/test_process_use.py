"""What a watch tells of the process it was asked about: its training evidence, and its GPU and host use."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.advisor.process_use import COMMAND_SHOWN, UseTally, render_not_training
from gputop.model import EVIDENCE_RANK, TrainingView
from tests.advisor.build import GIB, PID, gpu, row, snapshot, view

pytestmark = pytest.mark.fast


def plain(pid: int = PID) -> TrainingView:
    return dataclasses.replace(view(pid=pid), evidence=())


def test_a_torchrun_agent_whose_ranks_show_evidence_is_a_training_job():
    agent = TrainingView(pid=PID, ranks=(PID + 1,))
    rank = dataclasses.replace(view(pid=PID + 1), evidence=(EVIDENCE_RANK,))
    tally = UseTally(PID)

    tally.add(dataclasses.replace(snapshot(0.0, agent), training=(agent, rank)))

    assert tally.result().trains and tally.result().evidence == (EVIDENCE_RANK,)


def test_a_process_without_evidence_is_told_by_what_it_held_and_how_busy_its_gpu_was():
    tally = UseTally(PID)
    for t, busy, held in ((0.0, 20.0, 2), (1.0, 60.0, 3), (2.0, 40.0, 1)):
        tally.add(snapshot(t, plain(), (gpu(busy=busy),), (row(gib=held),)))

    use = tally.result()

    assert (use.trains, use.seen, use.snapshots) == (False, 3, 3)
    (held,) = use.gpus
    assert (held.memory_bytes, held.busy_mean, held.busy_max) == (3 * GIB, 40.0, 60.0)
    assert use.missing == ("probe report", "DataLoader workers", "launcher rank", "torch threads")


def test_a_long_command_line_is_cut_and_its_control_characters_shown():
    tally = UseTally(PID)
    snap = snapshot(0.0, plain())
    host = dataclasses.replace(snap.host_processes[0], name="python", command="python \x1b[2J" + "x" * 500)
    tally.add(dataclasses.replace(snap, host_processes=(host,)))

    (line,) = [line for line in render_not_training(tally.result()).splitlines() if line.startswith("  python")]

    assert "\\x1b[2J" in line and "\x1b" not in line
    assert len(line) == len("  python: ") + COMMAND_SHOWN and line.endswith("…")
