"""Command lines where they are cut to a column: the program by its base name, then the arguments, so a venv
interpreter's path never hides the script; the whole line where there is room for it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.text import Text

from gputop.document import snapshot_to_dict
from gputop.model import GpuProcess, Snapshot
from gputop.remote.status import LIVE, HostStatus
from gputop.table import render_text
from gputop.ui.process_rows import ViewOptions, build_rows
from gputop.ui.screens.detail import detail_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import process_line, summary_layout, summary_line
from gputop.ui.text.process_cells import cell_text
from tests.ui import scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

P = Palette()
VENV = "/home/alice/project/.venv/bin/python3"
COMMAND = f"{VENV} train.py --config configs/llama3-8b.yaml --data /datasets/fineweb"
SHORT = "python3 train.py --config configs/llama3-8b.yaml --data /datasets/fineweb"
PID = scenes.RANK_PIDS[0]


def venv_node() -> Snapshot:
    """The training node with rank 0 started by a virtual environment's interpreter, the busiest process there."""
    snap = scenes.training_node()
    hosts = tuple(replace(h, command=COMMAND) if h.pid == PID else h for h in snap.host_processes)
    by_pid = {h.pid: h for h in hosts}
    rows = tuple(replace(p, host=by_pid[p.pid], sm_percent=99.0) if p.pid == PID else p for p in snap.processes)
    return replace(snap, processes=rows, host_processes=hosts)


def rank0(snap: Snapshot) -> GpuProcess:
    return next(p for p in snap.processes if p.pid == PID)


def test_the_command_column_shows_the_interpreter_by_its_name_and_then_the_script() -> None:
    row = next(r for r in build_rows(venv_node(), ViewOptions()) if r.pid == PID)

    assert cell_text(row, "command") == SHORT


def test_the_filter_still_finds_a_process_by_its_interpreters_path() -> None:
    rows = build_rows(venv_node(), ViewOptions(filter_text="project/.venv"))

    assert [r.pid for r in rows] == [PID]


def test_the_detail_screen_and_the_json_keep_the_whole_command_line() -> None:
    snap = venv_node()
    detail = "\n".join(line.plain for line in detail_lines(snap, PID, None, 160, P) if isinstance(line, Text))

    assert f"Command  {COMMAND}" in detail
    assert {p["command"] for p in snapshot_to_dict(snap)["processes"] if p["pid"] == PID} == {COMMAND}


def test_once_cut_to_the_terminal_shows_the_script_and_into_a_pipe_keeps_the_whole_line() -> None:
    snap = venv_node()

    on_terminal = render_text(snap, width=120)
    into_pipe = render_text(snap)

    assert f"  {SHORT[:40]}" in on_terminal and VENV not in on_terminal
    assert f"  {COMMAND}" in into_pipe


def test_the_hosts_view_shows_the_script_in_the_summary_and_the_section() -> None:
    snap = venv_node()
    status = HostStatus(scenes.HOSTNAME, LIVE, last_snapshot_at=snap.time, stale_after_s=5)

    summary = summary_line(scenes.HOSTNAME, status, snap, snap.time, summary_layout([scenes.HOSTNAME], 160), 160, P)
    section = process_line(rank0(snap), 120, P)

    assert f"alice {SHORT[:30]}" in summary.plain
    assert f"  {SHORT[:40]}" in section.plain
