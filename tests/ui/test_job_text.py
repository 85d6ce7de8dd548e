"""The job view's text as plain values: a row per rank, the wait for the other ranks, the straggler marked, columns
that fold at 80 cells, N/A for what is unknown, host names made printable; and which job and findings it shows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop.formatting import NA
from gputop.jobs import Job, JobRank, find_jobs
from gputop.model import PROBE_AWAITED, PROBE_NONE, Advice, MainThread, ProbeReport
from gputop.ui.targets.job import StragglerMark, job_findings, job_target, straggler_mark
from gputop.ui.text.gpu import Palette
from gputop.ui.text.job import (
    COLUMNS,
    cell_text,
    job_columns,
    job_title,
    probe_hint,
    rank_cells,
    rank_row,
    rank_rows,
    sync_wait,
    table_width,
)
from tests.ui import job_scenes
from tests.ui.job_scenes import ADVICE, RANK_PIDS, STRAGGLER_PID, torchrun_job, unprobed_job

pytestmark = pytest.mark.fast

SNAP = torchrun_job()
JOB = find_jobs(SNAP)[0]


def keys(columns: tuple) -> list[str]:
    return [c.key for c in columns]


def test_a_row_per_rank_in_rank_order_with_its_gpu_and_figures() -> None:
    rows = rank_rows(JOB, SNAP)
    assert [r.pid for r in rows] == list(RANK_PIDS)
    assert [r.rank for r in rows] == [0, 1, 2, 3]
    assert [r.gpus for r in rows] == [(0,), (1,), (2,), (3,)]
    first = rows[0]
    assert cell_text(first, "steps") == "3.09"
    assert cell_text(first, "busy") == "61%"
    assert cell_text(first, "sm") == "38%"
    assert cell_text(first, "gpu_mem") == "30.0GiB"
    assert cell_text(first, "workers") == "3"
    assert cell_text(first, "workers_cpu") == "120%"


def test_sync_wait_is_the_main_threads_time_off_the_cpu_outside_the_data_wait() -> None:
    assert sync_wait(0.45, 0.05) == pytest.approx(0.5)
    assert sync_wait(0.97, 0.1) == 0.0
    assert sync_wait(None, 0.1) is None
    assert sync_wait(0.5, None) is None  # without the data wait, waiting for data could not be told apart


def test_a_rank_without_a_probe_report_reads_na_not_zero() -> None:
    view = replace(JOB.ranks[0].view, probe=ProbeReport(), main_thread=MainThread(busy_share=0.4))
    row = rank_row(JobRank(view, 0), SNAP)
    assert [cell_text(row, k) for k in ("steps", "data_wait", "sync_wait")] == [NA, NA, NA]


def test_a_rank_on_no_gpu_shows_a_dash_in_the_gpu_columns() -> None:
    row = rank_row(JobRank(replace(JOB.ranks[0].view, pid=1), 0), SNAP)
    assert [cell_text(row, k) for k in ("gpu", "busy", "sm", "gpu_mem")] == ["-"] * 4


def test_the_straggler_is_marked_in_its_rank_cell_and_its_note() -> None:
    rows = rank_rows(JOB, SNAP, StragglerMark(STRAGGLER_PID))
    assert [cell_text(r, "rank") for r in rows] == ["0", "1", "2 ◀", "3"]
    assert [cell_text(r, "note") for r in rows] == ["", "", "straggler", ""]
    p = Palette()
    assert rank_cells(rows[2], COLUMNS, p)[0].style != rank_cells(rows[0], COLUMNS, p)[0].style


def test_a_wide_table_has_every_column_and_no_host_on_one_machine() -> None:
    rows = rank_rows(JOB, SNAP, StragglerMark(STRAGGLER_PID))
    measured = [c.key for c in COLUMNS if c.key != "host" and not c.key.startswith("phase_")]  # no step timed
    assert keys(job_columns(JOB, rows, 159)) == measured


def test_at_80_columns_the_least_important_columns_go_first() -> None:
    rows = rank_rows(JOB, SNAP, StragglerMark(STRAGGLER_PID))
    columns = job_columns(JOB, rows, 79)
    assert table_width(columns) <= 79
    assert keys(columns) == ["rank", "pid", "gpu", "steps", "data_wait", "sync_wait", "busy", "sm", "gpu_mem"]


def test_hosts_get_a_column_and_their_control_characters_are_escaped() -> None:
    ranks = tuple(replace(r, host="node-\x1b[2J7") for r in JOB.ranks)
    job = replace(JOB, ranks=ranks)
    rows = rank_rows(job, SNAP)
    assert "host" in keys(job_columns(job, rows, 159))
    assert cell_text(rows[0], "host") == "node-\\x1b[2J7"
    assert "\x1b" not in "".join(t.plain for t in rank_cells(rows[0], COLUMNS, Palette()))


def test_a_single_process_has_no_sync_wait_column() -> None:
    job = Job("ab12", "single", JOB.ranks[:1])
    assert "sync_wait" not in keys(job_columns(job, rank_rows(job, SNAP), 159))


def test_the_title_names_the_job_its_user_its_ranks_and_the_straggler() -> None:
    title = job_title(JOB, rank_rows(JOB, SNAP, StragglerMark(STRAGGLER_PID)))
    assert title == f" Job {JOB.id} of alice · torchrun · 4 ranks · straggler: rank 2 (PID {STRAGGLER_PID}) "


def test_the_findings_of_a_job_are_its_own_and_those_about_its_ranks() -> None:
    other = replace(ADVICE[1], id="elsewhere", pid=1, pids=(), job=None)
    about_rank = replace(ADVICE[1], id="data-starved", job=None, pids=(), pid=RANK_PIDS[3])
    assert job_findings((*ADVICE, other, about_rank), JOB) == (*ADVICE, about_rank)
    assert straggler_mark(ADVICE, JOB) == StragglerMark(STRAGGLER_PID)  # measured by the CPU: no phase named
    assert straggler_mark(ADVICE[1:], JOB) is None


def test_j_takes_the_selected_processs_job_then_the_focuss_then_the_first_of_several_ranks() -> None:
    single = Job("0f", "single", JOB.ranks[:1])
    jobs = (single, JOB)
    assert job_target(jobs, job_scenes.AGENT_PID, None) == JOB
    assert job_target(jobs, RANK_PIDS[1] * 10, None) == JOB  # a DataLoader worker of rank 1
    assert job_target(jobs, 12345, None) == JOB
    assert job_target((single,), 12345, None) is None


def test_advice_of_another_job_is_left_out() -> None:
    foreign = Advice("straggler", "warning", "t", "d", "a", pid=424242, since=0.0, job="ffff", pids=(424242,))
    assert job_findings((foreign,), JOB) == ()


def with_probes(job: Job, probes: dict[int, ProbeReport]) -> Job:
    """``job`` with the probe report of the ranks named by PID replaced."""
    ranks = tuple(replace(r, view=replace(r.view, probe=probes[r.pid])) if r.pid in probes else r for r in job.ranks)
    return replace(job, ranks=ranks)


def test_a_job_without_any_probe_report_says_how_to_get_one() -> None:
    (job,) = find_jobs(unprobed_job())

    hint = probe_hint(job)

    assert hint.startswith("No probe report from this job, so STEPS/S, DATA WAIT and SYNC WAIT read N/A")
    assert "gputop run" in hint and "gputop.probe.install()" in hint


def test_the_ranks_without_a_probe_report_are_named() -> None:
    hint = probe_hint(with_probes(JOB, {RANK_PIDS[1]: ProbeReport(), RANK_PIDS[3]: ProbeReport()}))

    assert hint.startswith("Ranks 1, 3 send no probe report")


def test_ranks_that_await_their_first_report_are_not_told_to_start_the_probe() -> None:
    awaited = ProbeReport(PROBE_NONE, reason=PROBE_AWAITED)

    hint = probe_hint(with_probes(JOB, {pid: awaited for pid in RANK_PIDS}))

    assert hint.startswith("Awaiting the probe's first report")
    assert "gputop run" not in hint


def test_a_job_whose_ranks_all_report_needs_no_hint() -> None:
    assert probe_hint(JOB) == ""
