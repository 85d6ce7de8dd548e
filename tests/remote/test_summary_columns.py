"""The hosts view's summary columns hold their figures whole at every width."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.cells import cell_len

from gputop.remote.status import LIVE, HostStatus
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import process_line, summary_header, summary_layout, summary_line
from tests.remote.host_scenes import NOW, TRAINING_HOST
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


@pytest.mark.parametrize("width", [80, 120, 160])
def test_the_gpu_memory_of_a_one_gpu_host_is_shown_whole(width: int) -> None:
    snap = scenes.training_node()
    snap = replace(snap, gpus=snap.gpus[:1])  # 60.0GiB/80.0GiB: the longest two figures there are
    live = HostStatus(TRAINING_HOST, LIVE, last_snapshot_at=NOW, stale_after_s=5)
    layout = summary_layout([TRAINING_HOST], width)

    header = summary_header(layout, width, Palette()).plain
    line = summary_line(TRAINING_HOST, live, snap, NOW, layout, width, Palette()).plain

    assert "  60.0GiB/80.0GiB  " in line
    assert line.index("60.0GiB") == header.index("GPU MEMORY")
    assert len(line) <= width


def test_a_user_named_in_wide_characters_keeps_the_gpu_memory_column_in_line() -> None:
    first, second = (p for p in scenes.training_node().processes if p.pid in scenes.RANK_PIDS[:2])
    wide = replace(first, host=replace(first.host, user="研究者たち"))  # 10 cells in 5 characters

    lines = [process_line(proc, 120, Palette()).plain for proc in (wide, second)]

    assert len({cell_len(line[: line.index("GiB")]) for line in lines}) == 1
