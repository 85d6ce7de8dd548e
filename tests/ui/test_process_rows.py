"""What the process table shows for each view option, as plain rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop.model import HostProcess
from gputop.ui.process_rows import ViewOptions, build_rows, focus_family, focus_gpus
from tests.ui import mig_scenes, scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

SNAP = scenes.training_node()
ALICE = ViewOptions(user="alice")


def pids(options: ViewOptions, snap=SNAP) -> list[int]:  # type: ignore[no-untyped-def]
    return [row.pid for row in build_rows(snap, options)]


def test_flat_view_has_one_row_per_process_per_gpu() -> None:
    rows = build_rows(SNAP, ALICE)
    assert len(rows) == len(SNAP.processes)
    assert [row.gpus for row in rows if row.pid == scenes.EVAL_PID] == [(6,), (7,)]


def test_default_order_is_by_gpu_then_memory() -> None:
    rows = build_rows(SNAP, ALICE)
    keys = [(row.gpus[0], -(row.gpu_memory_bytes or 0)) for row in rows]
    assert keys == sorted(keys)


def test_usage_columns_sort_largest_first_and_reverse_flips() -> None:
    memory = [row.gpu_memory_bytes for row in build_rows(SNAP, replace(ALICE, sort_key="gpu_mem"))]
    assert memory == sorted(memory, reverse=True)
    flipped = [row.gpu_memory_bytes for row in build_rows(SNAP, replace(ALICE, sort_key="gpu_mem", reverse=True))]
    assert flipped == sorted(memory)


def test_unreadable_values_sort_last_either_way() -> None:
    for reverse in (False, True):
        rows = build_rows(SNAP, replace(ALICE, sort_key="sm", reverse=reverse))
        assert rows[-1].pid == scenes.XORG_PID  # its %SM is N/A


def test_text_filter_matches_pid_user_name_and_command() -> None:
    assert pids(replace(ALICE, filter_text="BOB")) == [scenes.NOTEBOOK_PID]
    assert pids(replace(ALICE, filter_text=str(scenes.XORG_PID))) == [scenes.XORG_PID]
    assert set(pids(replace(ALICE, filter_text="eval.py"))) == {scenes.EVAL_PID}


def test_compute_only_drops_graphics_processes() -> None:
    assert scenes.XORG_PID not in pids(replace(ALICE, compute_only=True))


def test_mine_only_keeps_the_users_processes() -> None:
    assert set(pids(replace(ALICE, mine_only=True))) == set(scenes.RANK_PIDS)


def test_tree_puts_workers_under_their_rank_and_ranks_under_torchrun() -> None:
    rows = build_rows(SNAP, replace(ALICE, tree=True))
    by_pid = {row.pid: row for row in rows}
    order = [row.pid for row in rows]
    assert order.index(scenes.TORCHRUN_PID) < order.index(scenes.RANK_PIDS[0]) < order.index(4200)
    assert by_pid[scenes.TORCHRUN_PID].tree_prefix == ""
    assert by_pid[scenes.RANK_PIDS[0]].tree_prefix == "├─ "
    assert by_pid[4201].tree_prefix == "│  └─ "
    assert by_pid[4200].is_worker and not by_pid[4200].on_gpu


def test_tree_merges_a_process_on_two_gpus_into_one_row() -> None:
    rows = [row for row in build_rows(SNAP, replace(ALICE, tree=True)) if row.pid == scenes.EVAL_PID]
    assert len(rows) == 1
    assert rows[0].gpus == (6, 7)
    assert rows[0].gpu_memory_bytes == sum(p.gpu_memory_bytes or 0 for p in SNAP.processes if p.pid == scenes.EVAL_PID)


def test_a_tree_filter_keeps_the_family_of_a_match() -> None:
    shown = pids(replace(ALICE, tree=True, filter_text="--rank 3"))
    assert shown == [scenes.TORCHRUN_PID, scenes.RANK_PIDS[3], 4230, 4231]


def test_focus_keeps_the_process_and_its_descendants() -> None:
    assert focus_family(SNAP, scenes.RANK_PIDS[0]) == {scenes.RANK_PIDS[0], 4200, 4201}
    assert pids(replace(ALICE, tree=True, focus_pid=scenes.RANK_PIDS[0])) == [scenes.RANK_PIDS[0], 4200, 4201]
    assert pids(replace(ALICE, focus_pid=scenes.RANK_PIDS[0])) == [scenes.RANK_PIDS[0]]


def test_a_gpu_process_the_host_cannot_see_is_still_a_tree_row() -> None:
    hidden = replace(SNAP, host_processes=tuple(h for h in SNAP.host_processes if h.pid != scenes.NOTEBOOK_PID))
    assert scenes.NOTEBOOK_PID in pids(replace(ALICE, tree=True), hidden)


def test_elapsed_is_measured_from_the_snapshot_clock() -> None:
    snap = replace(SNAP, processes=(), host_processes=(HostProcess(1, None, start_time=scenes.T0 - 61),))
    assert [row.elapsed_s for row in build_rows(snap, replace(ALICE, tree=True))] == [61.0]


def test_a_focus_on_a_mig_instance_keeps_only_the_instances_its_family_runs_on() -> None:
    snap = mig_scenes.mig_node()
    mig_gpu = next(g for g in snap.gpus if g.mig)
    on_instance = {p.pid: p.mig_index for p in snap.processes if p.gpu_index == mig_gpu.index}
    notebook = mig_scenes.NOTEBOOK_PIDS[0]

    (gpu,) = focus_gpus(snap, notebook)

    assert gpu.index == mig_gpu.index
    assert [m.index for m in gpu.mig] == [on_instance[notebook]]
    assert len(mig_gpu.mig) > 1  # the others were there to leave out


def test_a_focus_off_mig_keeps_its_gpus_whole() -> None:
    snap = mig_scenes.mig_node()
    plain = next(g for g in snap.gpus if not g.mig)
    pid = next(p.pid for p in snap.processes if p.gpu_index == plain.index)

    assert focus_gpus(snap, pid) == (plain,)
