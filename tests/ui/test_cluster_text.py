"""What a cluster adds to the screen, as plain text: a pod's names cut where they are least telling, and an
unhealthy GPU's cause cut where it is least needed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.text import Text

from gputop.ui.process_rows import NARROW_POD_COLUMN, POD_COLUMN, ViewOptions, build_rows
from gputop.ui.screens.detail import detail_lines
from gputop.ui.text.gpu import Palette, health_line
from gputop.ui.text.process_cells import fit_parts, row_cells
from tests.ui import cluster_scenes, scenes

pytestmark = pytest.mark.fast

RANK = scenes.RANK_PIDS[0]


def cell(pid: int, column, width: int) -> str:  # type: ignore[no-untyped-def]
    row = next(r for r in build_rows(cluster_scenes.pod_node(), ViewOptions()) if r.pid == pid)
    (parts,) = row_cells(row, (column,))
    return "".join(text for text, _ in fit_parts(parts, width)).rstrip()


def test_a_pods_names_too_long_for_the_column_keep_the_namespace_the_pods_end_and_the_container() -> None:
    assert cell(RANK, POD_COLUMN, POD_COLUMN.width) == "ml-training/llama3…orker-0/trainer"


def test_the_narrow_pod_column_keeps_the_end_that_tells_a_pod_from_its_siblings() -> None:
    assert cell(RANK, NARROW_POD_COLUMN, NARROW_POD_COLUMN.width) == "llama3-…worker-0"


def test_a_pods_names_that_fit_are_shown_whole() -> None:
    assert cell(RANK, POD_COLUMN, 60) == "ml-training/llama3-8b-pretrain-worker-0/trainer"


def test_a_slurm_jobs_cell_is_not_cut_in_its_middle() -> None:
    assert cell(scenes.EVAL_PID, POD_COLUMN, 12) == "slurm 48213…"


def test_a_cause_too_long_for_the_card_keeps_what_was_seen_whole_and_leaves_the_action_to_doctor() -> None:
    gpu = cluster_scenes.unhealthy_node().gpus[cluster_scenes.CRITICAL_GPU]
    line = health_line(gpu, 76, Palette()).plain
    assert line == "HLTH Xid 79: GPU has fallen off the bus  (+1 more: gputop doctor)"


def test_a_cause_that_fits_is_shown_with_its_action() -> None:
    gpu = cluster_scenes.unhealthy_node().gpus[cluster_scenes.WARN_GPU]
    line = health_line(gpu, 76, Palette()).plain
    assert line == "HLTH PCIe replays at 31/min (DCGM warns above 8): check the slot and riser"


def test_the_detail_names_each_gpu_of_the_process_by_its_pci_bus_id_where_the_driver_gave_one() -> None:
    snap = cluster_scenes.pod_node()
    gpus = tuple(replace(g, pci_bus_id=f"00000000:{0x18 + g.index:02X}:00.0") for g in snap.gpus)
    rank_gpu = next(p.gpu_index for p in snap.processes if p.pid == RANK)

    lines = [
        line.plain
        for line in detail_lines(replace(snap, gpus=gpus), RANK, None, 160, Palette())
        if isinstance(line, Text)
    ]

    (gpu_line,) = [line for line in lines if line.startswith("GPUs")]
    assert f"{rank_gpu}: " in gpu_line and f"(PCI 00000000:{0x18 + rank_gpu:02X}:00.0)" in gpu_line


def test_the_narrow_pod_column_keeps_the_user_of_a_process_in_no_pod() -> None:
    assert cell(scenes.EVAL_PID, NARROW_POD_COLUMN, NARROW_POD_COLUMN.width) == "carol"
