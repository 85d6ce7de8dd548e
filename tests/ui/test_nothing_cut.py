"""Nothing is cut while there is room: a probe hint, a stall, a finding's change and its words wrap onto the next
line or point to where they are whole, and the status line gives up its least useful parts before the focus."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from rich.text import Text

from gputop.model import NO_PROCESS, PROBE_NONE, ProbeReport, TrainingView
from gputop.remote.status import LIVE, HostStatus
from gputop.ui.app import GputopApp
from gputop.ui.text.advice import brief_lines, full_lines
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import section_lines
from gputop.ui.text.process_cells import fit_parts
from gputop.ui.text.training import NO_REPORT, TrainingSparks, panel_lines, summary_lines
from gputop.ui.widgets.status_bar import StatusBar
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.remote import host_scenes
from tests.ui import job_scenes, scenes
from tests.ui.training_scenes import JOB_PID, STARVED_ADVICE, starved_job

MakeApp = Callable[..., GputopApp]
P = Palette()
SPARKS = TrainingSparks("▁" * 19, "▁" * 19, "▁" * 19)
ALLOC_CONF = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def words(lines: list[Text]) -> str:
    """The lines' text as one run of words, however it was wrapped."""
    return " ".join(" ".join(line.plain.split()) for line in lines)


def without_probe(workers: bool = True) -> TrainingView:
    view = replace(starved_job().training[0], probe=ProbeReport(PROBE_NONE))
    return view if workers else replace(view, workers=())


def left_column(lines: list[Text], width: int = 156) -> list[Text]:
    return [Text(line.plain[: (width - 3) // 2]) for line in lines]


@pytest.mark.fast
@pytest.mark.parametrize("workers", [True, False])
def test_the_probe_hint_wraps_in_the_left_column_of_a_wide_panel(workers: bool) -> None:
    lines = left_column(panel_lines(without_probe(workers), SPARKS, {}, 156, P))

    assert NO_REPORT in words(lines)
    assert not any(line.plain.rstrip().endswith("…") for line in lines)


@pytest.mark.fast
def test_the_probe_hint_wraps_at_80_columns() -> None:
    lines = panel_lines(without_probe(), TrainingSparks(), {}, 76, P)

    assert NO_REPORT in words(lines)
    assert all(len(line.plain) <= 76 and not line.plain.endswith("…") for line in lines)


@pytest.mark.fast
def test_the_summary_gives_the_probe_hint_whole_or_says_where_it_is() -> None:
    wide = summary_lines(without_probe(), TrainingSparks(), 156, P)[0].plain
    narrow = summary_lines(without_probe(), TrainingSparks(), 76, P)[0].plain

    assert wide.endswith(NO_REPORT)
    assert narrow.endswith("no probe report: l says how to get one") and len(narrow) <= 76


@pytest.mark.fast
@pytest.mark.parametrize("width", [76, 156])
def test_a_stall_is_shown_whole(width: int) -> None:
    view = starved_job().training[0]
    stalled = replace(view.probe.loaders[0], waiting_now_s=3.2)
    view = replace(view, probe=replace(view.probe, loaders=(stalled,)))

    lines = panel_lines(view, SPARKS if width > 80 else TrainingSparks(), {}, width, P)

    assert "blocked on this batch for 3.2 s" in words(lines)


@pytest.mark.fast
def test_a_finding_whose_change_is_long_gives_the_change_a_line_of_its_own() -> None:
    finding = replace(STARVED_ADVICE[0], suggest=ALLOC_CONF)

    lines = [line.plain for line in brief_lines([finding], 76, P, show_pid=True)]

    assert lines == [
        f"WARN  PID 48213  {finding.title}",
        "      → PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ]


@pytest.mark.fast
def test_a_finding_of_two_lines_counts_two_against_the_limit() -> None:
    findings = [replace(STARVED_ADVICE[0], suggest=ALLOC_CONF), *STARVED_ADVICE[1:]]

    lines = [line.plain for line in brief_lines(findings, 76, P, show_pid=True, limit=3)]

    assert len(lines) == 3
    assert lines[-1] == "      … 2 more: l shows every finding in full"


@pytest.mark.fast
def test_every_finding_in_full_wraps_its_title_its_change_and_where_it_comes_from() -> None:
    finding = job_scenes.ADVICE[0]
    finding = replace(finding, pids=tuple(range(9101, 9117)), suggest={"num_workers": 2, **ALLOC_CONF})

    lines = full_lines([finding], 64, P)

    assert not any(line.plain.endswith("…") for line in lines)
    assert all(len(line.plain) <= 64 for line in lines)
    text = words(lines)
    assert "suggest num_workers=2, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    assert "PIDs 9101, 9102, 9103, 9104, 9105, 9106, 9107, 9108, 9109, 9110, 9111, 9112" in text
    assert f"of job {finding.job} · from both · since" in text


async def test_the_dashboard_at_160x48_shows_the_whole_probe_hint(make_app: MakeApp) -> None:
    def no_probe(t: float):  # type: ignore[no-untyped-def]
        snap = starved_job(t)
        return replace(snap, training=(replace(snap.training[0], probe=ProbeReport(PROBE_NONE)),))

    app = make_app(scenes.history(no_probe, ticks=5), focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(TrainingPanel)
        lines = [Text(strip.text) for strip in panel.drawn_lines()]

    assert NO_REPORT in words(left_column(lines))


@pytest.mark.parametrize(("size", "driver"), [((80, 24), False), ((160, 48), True)])
async def test_the_status_line_drops_the_driver_before_it_cuts_the_focus(
    make_app: MakeApp, size: tuple[int, int], driver: bool
) -> None:
    app = make_app(scenes.history(starved_job, ticks=3), focus_pid=JOB_PID)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        line = app.screen.query_one(StatusBar).drawn_lines()[0].text

    assert f"focus PID {JOB_PID} " in line and "every 1s" in line
    assert ("driver 550.90.07" in line) is driver


@pytest.mark.fast
def test_a_workers_note_too_long_for_the_column_is_left_out_not_cut_to_an_ellipsis() -> None:
    worker = (("│  ├─ ", "tree"), ("pt_data_worker", "worker"), ("  DataLoader worker", "dim"))

    assert "".join(text for text, _ in fit_parts(worker, 20)) == "│  ├─ pt_data_worker"
    assert "".join(text for text, _ in fit_parts(worker, 40)).rstrip() == "│  ├─ pt_data_worker  DataLoader worker"
    assert fit_parts((("(not in this PID namespace)", "dim"),), 10)[-1] == ("…", "dim")


@pytest.mark.fast
def test_a_hosts_section_leaves_out_the_load_and_then_the_driver_rather_than_cut_a_figure() -> None:
    snap = scenes.training_node()
    live = HostStatus(host_scenes.TRAINING_HOST, LIVE, last_snapshot_at=snap.time, stale_after_s=5)

    wide, narrow, tight = (section_lines(live, snap, None, snap.time, w, P)[0].plain for w in (156, 76, 50))

    assert "  load 41.32   MEM 612GiB / 1007GiB" in wide
    assert narrow == "driver 550.90.07  CUDA 12.4   CPU 54% of 64   MEM 612GiB / 1007GiB"
    assert tight == "CPU 54% of 64   MEM 612GiB / 1007GiB"


@pytest.mark.fast
def test_a_gpus_finding_that_names_its_gpu_in_the_title_is_not_labelled_with_it_again() -> None:
    finding = replace(
        STARVED_ADVICE[0],
        pid=NO_PROCESS,
        pids=(),
        suggest={},
        title="GPU 4 is failing: Xid 79, GPU has fallen off the bus",
        evidence={"gpu_index": 4},
    )

    lines = [line.plain for line in brief_lines([finding], 76, P, show_pid=True)]

    assert lines == ["WARN  GPU 4 is failing: Xid 79, GPU has fallen off the bus"]
