"""The step's anatomy as text, from plain model values: the stacked bar of the phases, the summary's step line, the
training screen's step section, the job view's phase columns and ``--once``'s line; what is unknown says why."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console
from rich.style import Style
from rich.text import Text

from gputop.jobs import find_jobs
from gputop.model import StepAnatomy, SyncSite, TrainingView
from gputop.table import render_text
from gputop.ui.targets.job import StragglerMark, straggler_mark
from gputop.ui.text.gpu import Palette
from gputop.ui.text.job import cell_text, job_columns, job_title, rank_cells, rank_rows, table_width
from gputop.ui.text.step import phase_bar, phase_cells, step_words
from gputop.ui.text.training import TrainingSparks, panel_lines, summary_lines
from tests.ui import job_scenes
from tests.ui.training_scenes import cpu_stepped_job, starved_job, step_anatomy, stepped_job

pytestmark = pytest.mark.fast

P = Palette()
NO_SPARKS = TrainingSparks()
RED = Style(color="red")


def plain(lines: list[Text]) -> str:
    return "\n".join(line.plain for line in lines)


def stepped() -> TrainingView:
    return stepped_job().training[0]


def cpu() -> TrainingView:
    return cpu_stepped_job().training[0]


def screen(view: TrainingView, width: int = 120) -> str:
    return plain(panel_lines(view, NO_SPARKS, {}, width, P, step_in_full=True))


def even_step(*phases: tuple[str, float]) -> StepAnatomy:
    return StepAnatomy("DataLoader", "cuda", step_s=sum(s for _, s in phases), phases_s=phases)  # type: ignore[arg-type]


def test_each_phase_gets_cells_in_proportion_to_its_time_and_they_fill_the_bar() -> None:
    step = even_step(("data", 0.01), ("forward", 0.03), ("backward", 0.06))

    assert phase_cells(step, 20) == [("data", 2), ("forward", 6), ("backward", 12)]
    assert phase_bar(step, 20, {}).plain == "D█F█████B███████████"


def test_every_segment_starts_with_its_phases_letter_in_reverse_video_so_it_reads_without_colour() -> None:
    bar = phase_bar(even_step(("forward", 0.02), ("backward", 0.02)), 10, {"forward": RED})

    letters = [span for span in bar.spans if span.style.reverse]  # type: ignore[union-attr]
    assert [bar.plain[span.start : span.end] for span in letters] == ["F", "B"]
    assert letters[0].style == RED + Style(reverse=True, bold=True)


def test_a_short_phase_keeps_one_cell_and_its_letter() -> None:
    bar = phase_bar(even_step(("forward", 0.5), ("optimizer", 0.001), ("backward", 0.5)), 12, {})

    assert bar.cell_len == 12
    assert "O" in bar.plain


def test_phases_the_probe_did_not_see_are_not_drawn() -> None:
    bar = phase_bar(cpu().probe.step, 40, {})  # type: ignore[arg-type]

    assert [c for c in bar.plain if c != "█"] == ["D", "F", "B", "O", "R"]  # no copies, no collectives


def test_the_summary_gets_a_step_line_with_the_bar_mfu_and_energy_that_fits_80_columns() -> None:
    lines = summary_lines(stepped(), NO_SPARKS, 76, P)

    assert len(lines) == 3
    step = lines[1].plain
    assert step.startswith("STEP 128 ms  D█")
    assert step.endswith("MFU 9%  57.3 J/step")
    assert all(line.cell_len <= 76 for line in lines)


def test_a_wide_summary_gives_each_phases_milliseconds_beside_the_bar() -> None:
    step = summary_lines(stepped(), NO_SPARKS, 156, P)[1].plain

    assert "  D 67.6 H 6.02 F 17.5 B 25.9 O 6.02 R 4.82  MFU 9%" in step


def test_where_no_bar_fits_the_summary_gives_the_phases_in_words() -> None:
    step = summary_lines(stepped(), NO_SPARKS, 44, P)[1].plain

    assert step.startswith("STEP 128 ms  D data 67.6 H h2d 6.02")
    assert "█" not in step
    assert len(step) <= 44


def test_a_cpu_job_reads_na_for_mfu_and_energy_and_the_screen_says_why() -> None:
    summary = plain(summary_lines(cpu(), NO_SPARKS, 76, P))
    full = screen(cpu())

    assert "MFU N/A  J/step N/A" in summary
    assert "MFU         N/A (a CPU job: no GPU peak to compare with)" in full
    assert "ENERGY      N/A (the job uses no GPU: NVML's energy counter is per GPU)" in full
    assert "SYNCS       N/A (no CUDA: nothing to wait for)" in full
    assert "timed on the host's clock" in full


def test_a_job_whose_cost_was_not_computed_says_so_rather_than_zero() -> None:
    view = replace(stepped(), cost=None)

    assert "MFU N/A (not computed)" in summary_lines(view, NO_SPARKS, 156, P)[1].plain


def test_the_training_screen_shows_each_phase_with_its_share_and_the_steps_spread() -> None:
    full = screen(stepped())

    assert "D data wait 67.6 ms 53%" in full
    assert "H host-to-device copies 6.02 ms 5%" in full
    assert "STEP        128 ms median  p95 152 ms  warm-up 2,140 ms  drift ×1.03  7.82 steps/s  500.5 samples/s" in full


def test_the_training_screen_names_each_sync_site_flops_mfu_with_its_peak_and_energy() -> None:
    full = screen(stepped())

    assert "SYNCS       2.0 per step (on 40 sampled steps)" in full
    assert "item at train.py:57  1.0 per step" in full
    assert "FLOPS       11.8 TFLOP per step (counted)  92.3 TFLOP/s achieved" in full
    assert "MFU         9% of 989 TFLOP/s bf16  peak: NVIDIA H100 SXM datasheet, dense bf16" in full
    assert "ENERGY      57.3 J per step  0.895 J per sample  448 W" in full


def test_the_loader_line_says_where_the_dataloader_was_built() -> None:
    assert "built at train.py:41" in screen(stepped())


def test_the_dashboards_full_panel_keeps_the_step_to_its_bar_phases_and_cost() -> None:
    panel = plain(panel_lines(stepped(), NO_SPARKS, {}, 120, P))

    assert "COST        MFU 9%  57.3 J/step" in panel
    assert "D data 67.6  H h2d 6.02" in panel
    assert "SYNCS" not in panel and "warm-up" not in panel


def test_a_hostile_sync_site_and_loader_line_reach_the_terminal_as_visible_escapes() -> None:
    view = stepped()
    step = replace(view.probe.step, sync_sites=(SyncSite("train.py:57\x1b]0;pwned\x07", "item\x1b[2J", 1.0),))  # type: ignore[type-var]
    loader = replace(view.probe.loaders[0], created_at="train.py:41\x9b31m")
    hostile = replace(view, probe=replace(view.probe, step=step, loaders=(loader,)))

    full = screen(hostile)

    assert "item\\x1b[2J at train.py:57\\x1b]0;pwned\\x07" in full
    assert "built at train.py:41\\x9b31m" in full
    assert not any(c in full for c in "\x1b\x07\x9b")


def test_without_a_timed_step_the_panels_are_as_before() -> None:
    view = starved_job().training[0]

    assert len(summary_lines(view, NO_SPARKS, 76, P)) == 2
    assert "STEP " not in screen(view)


def test_a_step_without_phases_yet_says_why() -> None:
    view = stepped()
    step = replace(view.probe.step, phases_s=(), unavailable={"phases_s": "first steps: warming up"})  # type: ignore[type-var]
    waiting = replace(view, probe=replace(view.probe, step=step))

    assert "PHASES      N/A (first steps: warming up)" in screen(waiting)


# -- the job view ---------------------------------------------------------------------------------------------------

SNAP = job_scenes.stepped_torchrun_job()
JOB = find_jobs(SNAP)[0]


def test_each_rank_gets_a_column_per_phase_in_milliseconds() -> None:
    rows = rank_rows(JOB, SNAP)
    columns = job_columns(JOB, rows, 200)

    assert [c.title for c in columns if c.key.startswith("phase_")] == [
        "DATA",
        "H2D",
        "FWD",
        "BWD",
        "OPT",
        "COLL",
        "REST",
    ]
    assert [cell_text(rows[0], f"phase_{p}") for p in ("forward", "backward", "collective")] == ["60.5", "117", "120"]
    assert "phases in ms per step" in job_title(JOB, rows)


def test_a_phase_no_rank_reports_gets_no_column() -> None:
    rows = [replace(r, phases_s=tuple(p for p in r.phases_s if p[0] != "h2d")) for r in rank_rows(JOB, SNAP)]

    assert "phase_h2d" not in [c.key for c in job_columns(JOB, rows, 200)]


def test_the_stragglers_longer_phase_is_marked_and_named_in_the_title() -> None:
    rows = rank_rows(JOB, SNAP, straggler_mark(job_scenes.STEP_ADVICE, JOB))
    straggler = rows[job_scenes.STRAGGLER]

    assert straggler.longer_phase == "forward"
    assert cell_text(straggler, "phase_forward") == "▲181"
    assert cell_text(rows[0], "phase_forward") == "60.5"
    assert "straggler: rank 2 (PID 9103, longer in forward)" in job_title(JOB, rows)
    cells = rank_cells(straggler, job_columns(JOB, rows, 200), P)
    assert [c.plain for c in cells if c.style.reverse] == ["▲181"]  # type: ignore[union-attr]


def test_at_80_columns_the_phases_that_repeat_the_waits_fold_first_and_the_stragglers_phase_stays() -> None:
    rows = rank_rows(JOB, SNAP, straggler_mark(job_scenes.STEP_ADVICE, JOB))
    columns = job_columns(JOB, rows, 79)

    assert table_width(columns) <= 79
    keys = [c.key for c in columns]
    assert keys == [
        "rank",
        "pid",
        "data_wait",
        "sync_wait",
        *(f"phase_{p}" for p in ("h2d", "forward", "backward", "optimizer", "other")),
    ]


def test_the_marked_phase_is_the_one_the_finding_names_never_one_the_view_works_out() -> None:
    # The finding measured by the CPU names no phase: none is marked, though the ranks report theirs.
    rows = rank_rows(JOB, SNAP, straggler_mark(job_scenes.ADVICE, JOB))
    assert [r.longer_phase for r in rows] == [None] * 4 and rows[job_scenes.STRAGGLER].straggler
    # The finding's phase, where the ranks report it, even if another phase of the rank is longer too.
    rows = rank_rows(JOB, SNAP, StragglerMark(job_scenes.STRAGGLER_PID, "backward"))
    assert rows[job_scenes.STRAGGLER].longer_phase == "backward"
    assert cell_text(rows[job_scenes.STRAGGLER], "phase_backward").startswith("▲")
    # A recording's or a remote host's finding naming what is no phase marks nothing.
    hostile = replace(job_scenes.STEP_ADVICE[0], evidence={"phase": "\x1b[2Jforward"})
    assert straggler_mark((hostile,), JOB) == StragglerMark(job_scenes.STRAGGLER_PID)


def test_a_narrow_table_keeps_the_stragglers_phase_whichever_it_is() -> None:
    rows = [
        replace(r, longer_phase="collective") if r.straggler else r
        for r in rank_rows(JOB, SNAP, straggler_mark(job_scenes.STEP_ADVICE, JOB))
    ]

    assert "phase_collective" in [c.key for c in job_columns(JOB, rows, 79)]


# -- --once -----------------------------------------------------------------------------------------------------------


def test_once_prints_each_ranks_phases_mfu_and_energy_on_a_line() -> None:
    text = render_text(SNAP)

    assert (
        "rank 2 step 325 ms: data 4.00 · h2d 2.70 · fwd 181 · bwd 120 · opt 9.60 · coll 0.80 · rest 6.20 ms · MFU 20% "
        "· 224 J/step" in text
    )


def test_once_says_why_a_cpu_jobs_mfu_and_energy_are_unknown() -> None:
    words = step_words(cpu())

    assert words.startswith("step 400 ms: data 12.0 · fwd 120 · bwd 178 · opt 58.2 · rest 31.0 ms")
    assert "MFU N/A (a CPU job: no GPU peak to compare with)" in words
    assert "energy N/A (the job uses no GPU" in words


def test_a_step_line_is_only_for_a_process_whose_steps_are_timed() -> None:
    assert step_words(starved_job().training[0]) == ""
    assert step_anatomy(0.1, 0.5, ()).phases_s == (("data", 0.05),)


def test_only_the_letter_of_a_legend_entry_is_in_reverse_video() -> None:
    summary = summary_lines(stepped(), NO_SPARKS, 156, P)[1]
    start = summary.plain.index("F 17.5")

    console = Console()
    assert summary.get_style_at_offset(console, start).reverse
    assert not summary.get_style_at_offset(console, start + 2).reverse
