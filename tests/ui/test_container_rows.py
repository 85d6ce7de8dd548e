"""The process table's CONTAINER column: when it is there, what each cell says, and the filter matching it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.text import Text

from gputop.model import Container, HostProcess, frozen_reasons
from gputop.ui.process_rows import CONTAINER_COLUMN, ViewOptions, any_container, build_rows, column_for
from gputop.ui.screens.detail import detail_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.text.process_cells import cell_text
from tests.ui import container_scenes, scenes

pytestmark = pytest.mark.fast


def rows(**options: object) -> dict[int, str]:
    snap = container_scenes.container_node()
    return {r.pid: cell_text(r, "container") for r in build_rows(snap, ViewOptions(**options))}  # type: ignore[arg-type]


def test_the_column_is_there_when_a_process_runs_in_a_container() -> None:
    assert any_container(container_scenes.container_node())
    assert not any_container(scenes.training_node())


def test_a_systemd_unit_alone_does_not_bring_the_column() -> None:
    snap = scenes.training_node()
    hosts = tuple(replace(h, container=container_scenes.DESKTOP) for h in snap.host_processes)
    assert not any_container(replace(snap, host_processes=hosts))


def test_each_cell_names_the_container_in_a_few_words() -> None:
    cells = rows()
    assert cells[scenes.RANK_PIDS[0]] == "k8s 7f3a9c/c0ffee12"
    assert cells[scenes.NOTEBOOK_PID] == "docker a1b2c3d4e5f6"
    assert cells[scenes.EVAL_PID] == "slurm job 48213"
    assert cells[scenes.XORG_PID] == "systemd display-manager.service"


def test_a_process_in_no_container_shows_a_dash_and_an_unreadable_one_na() -> None:
    plain = HostProcess(1)
    unknown = HostProcess(2, unavailable=frozen_reasons({"container": "access denied"}))
    snap = replace(scenes.training_node(), host_processes=(plain, unknown))
    by_pid = {r.pid: cell_text(r, "container") for r in build_rows(snap, ViewOptions(tree=True))}
    assert (by_pid[1], by_pid[2]) == ("-", "N/A")


def test_the_filter_matches_the_container_words() -> None:
    assert set(rows(filter_text="slurm job")) == {scenes.EVAL_PID}
    assert set(rows(filter_text="A1B2C3")) == {scenes.NOTEBOOK_PID}


def test_the_column_sorts_by_its_words() -> None:
    assert column_for("container") == CONTAINER_COLUMN
    ordered = [r.container for r in build_rows(container_scenes.container_node(), ViewOptions(sort_key="container"))]
    known = [c for c in ordered if c is not None]
    assert known == sorted(known) and ordered == known + [None] * (len(ordered) - len(known))


def test_a_cgroup_label_is_its_path() -> None:
    assert Container("cgroup", "/process_api/c387").label == "cgroup /process_api/c387"


def test_the_detail_screen_names_a_bare_cgroups_path_once() -> None:
    snap = scenes.training_node()
    pid = scenes.XORG_PID
    hosts = tuple(
        replace(h, container=Container("cgroup", "/process_api/c387")) if h.pid == pid else h
        for h in snap.host_processes
    )

    lines = detail_lines(replace(snap, host_processes=hosts), pid, None, 160, Palette())

    runs_in = next(line.plain for line in lines if isinstance(line, Text) and line.plain.startswith("Runs in"))
    assert runs_in == "Runs in  cgroup /process_api/c387"
