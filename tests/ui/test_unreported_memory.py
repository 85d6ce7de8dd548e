"""A process whose GPU memory the driver does not report (WDDM, some containers, vGPU) reads N/A in the
process table, flat and as a tree, never 0 B or 16 EiB."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop.formatting import NA
from gputop.model import NOT_REPORTED, frozen_reasons
from gputop.ui.process_rows import ViewOptions, build_rows
from gputop.ui.text.process_cells import cell_text
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


@pytest.mark.parametrize("tree", [False, True])
def test_unreported_memory_is_na_in_the_process_table(tree: bool) -> None:
    snap = scenes.training_node()
    target = snap.processes[0]
    unreported = replace(target, gpu_memory_bytes=None, unavailable=frozen_reasons({"gpu_memory_bytes": NOT_REPORTED}))
    snap = replace(snap, processes=(unreported, *(p for p in snap.processes if p.pid != target.pid)))

    rows = [r for r in build_rows(snap, ViewOptions(tree=tree)) if r.pid == target.pid]

    assert [r.gpu_memory_bytes for r in rows] == [None]
    assert cell_text(rows[0], "gpu_mem") == NA
