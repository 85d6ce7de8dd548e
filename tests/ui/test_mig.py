"""MIG on the dashboard: a row per instance under its GPU card, a MIG column in the process table while some GPU is
in MIG mode (and only then), and the pictures of a MIG box at 160x48 and 80x24."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from gputop.model import MigInstance
from gputop.ui.app import GputopApp
from gputop.ui.process_rows import ViewOptions, build_rows
from gputop.ui.text.gpu import (
    Palette,
    card_line_count,
    card_lines,
    compact_line,
    compact_mig_line,
    mig_lines,
    mig_title,
)
from gputop.ui.text.process_cells import cell_text
from gputop.ui.widgets.gpu_card import GpuCard
from gputop.ui.widgets.process_table import ProcessTable
from tests.ui import scenes
from tests.ui.mig_scenes import ampere_gpu, ampere_node, mig_gpu, mig_node

MakeApp = Callable[..., GputopApp]
SMALL = (80, 24)
LARGE = (160, 48)


async def two_frames(pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    await pilot.pause()


def plain(lines: list[Text]) -> list[str]:
    return [line.plain for line in lines]


def test_a_mig_card_has_a_row_per_instance_instead_of_busy():
    gpu = mig_gpu(scenes.T0)

    lines = plain(card_lines(gpu, scenes_sparks(), 76, Palette(), (1, 2, 0)))

    assert len(lines) == card_line_count(gpu) == 6
    assert lines[0].startswith("MEM")
    assert not any(line.startswith("BUSY") for line in lines)
    first, second, idle = lines[1:4]
    assert first.startswith(" 0 3g.40gb  GI 1") and "31.0GiB / 39.2GiB" in first and first.rstrip().endswith("1 proc")
    assert "SM  79%" in first and "tensor  53%" in first
    assert second.startswith(" 1 2g.20gb  GI 5") and second.rstrip().endswith("2 procs")
    assert idle.startswith(" 2 1g.10gb  GI 13") and idle.rstrip().endswith("0 procs")
    assert all(len(line) <= 76 for line in lines)
    assert mig_title(gpu) == "MIG · 3 instances"


def scenes_sparks():  # type: ignore[no-untyped-def]
    from gputop.ui.text.gpu import Sparks

    return Sparks()


def test_an_instance_without_gpm_reads_na():
    (line,) = mig_lines(
        [MigInstance(3, 2, 0, "3g.20gb", memory_total_bytes=20 * 1024**3, memory_used_bytes=0)], [0], 90, Palette()
    )

    assert "SM  N/A" in line.plain and "tensor  N/A" in line.plain


def test_the_rows_of_a_mig_card_line_up_whatever_their_process_counts():
    rows = plain(mig_lines(mig_gpu(scenes.T0).mig, (1, 2, 0), 76, Palette()))

    assert len({row.index(" / ") for row in rows}) == 1
    assert len({row.index("SM ") for row in rows}) == 1
    assert len({row.index(" proc") for row in rows}) == 1


def test_a_mig_gpu_whose_memory_is_refused_says_why_in_full_on_its_card():
    lines = plain(card_lines(ampere_gpu(scenes.T0), scenes_sparks(), 76, Palette(), (1, 1)))

    assert lines[0].startswith("MEM ") and "N/A (no permission: root only in MIG mode)" in lines[0]
    assert "9.00GiB / 19.8GiB" in lines[1]


def test_its_compact_row_says_why_in_short_beside_the_instance_count():
    line = compact_line(ampere_gpu(scenes.T0), "", 78, Palette()).plain

    assert " N/A (no permission) MIG · 2 " in line
    assert len(line) <= 78


def test_instance_rows_without_gpm_say_why_sm_and_tensor_are_na():
    instance = ampere_gpu(scenes.T0).mig[0]

    (row,) = plain(mig_lines([instance], [1], 76, Palette()))
    compact = compact_mig_line(instance, 1, 78, Palette()).plain

    assert "SM, tensor: unsupported  1 proc" in row and len(row) <= 76
    assert "SM, TC: unsupported  1 proc" in compact


def test_the_compact_row_of_a_mig_gpu_names_its_instances():
    assert "MIG · 3 instances" in compact_line(mig_gpu(scenes.T0), "", 80, Palette()).plain


def test_a_pending_mode_change_is_in_the_title():
    from dataclasses import replace

    from gputop.model import MIG_DISABLED

    gpu = replace(mig_gpu(scenes.T0), mig_pending_mode=MIG_DISABLED)
    assert mig_title(gpu) == "MIG · 3 instances · MIG off after reset"
    assert mig_title(scenes.gpu(1, scenes.T0)) == ""


def test_process_rows_name_their_instance():
    rows = build_rows(mig_node(), ViewOptions())

    assert [(row.pid, cell_text(row, "mig")) for row in rows] == [
        (4101, "3g.40gb#1"),
        (5120, "2g.20gb#5"),
        (5121, "2g.20gb#5"),
        (4102, "-"),
    ]
    tree = build_rows(mig_node(), ViewOptions(tree=True))
    assert {row.pid: row.mig for row in tree if row.mig} == {4101: "3g.40gb#1", 5120: "2g.20gb#5", 5121: "2g.20gb#5"}
    by_mig = build_rows(mig_node(), ViewOptions(sort_key="mig"))
    assert [row.pid for row in by_mig] == [5120, 5121, 4101, 4102]


async def test_the_mig_column_shows_only_while_some_gpu_is_in_mig_mode(make_app: MakeApp) -> None:
    app = make_app([mig_node()])
    async with app.run_test(size=LARGE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        assert [table.cells_at(i)[:3] for i in range(table.row_count)] == [
            ["0", "3g.40gb#1", "4101"],
            ["0", "2g.20gb#5", "5120"],
            ["0", "2g.20gb#5", "5121"],
            ["1", "-", "4102"],
        ]
        card = app.screen.query_one("#gpu-0", GpuCard)
        assert card.view is not None and card.view.mig_processes == (1, 2, 0)
    plain_app = make_app([scenes.training_node()])
    async with plain_app.run_test(size=LARGE) as pilot:
        await pilot.pause()
        table = plain_app.screen.query_one(ProcessTable)
        assert table.cells_at(0)[1] == str(scenes.RANK_PIDS[0])


def test_a_mig_box(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(make_app(scenes.history(mig_node)), terminal_size=LARGE, run_before=two_frames)


def test_a_mig_box_at_80x24(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(make_app(scenes.history(mig_node)), terminal_size=SMALL, run_before=two_frames)


def test_an_ampere_mig_box_seen_by_another_user(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(make_app(scenes.history(ampere_node)), terminal_size=LARGE, run_before=two_frames)


def test_an_ampere_mig_box_seen_by_another_user_at_80x24(snap_compare, make_app: MakeApp) -> None:
    assert snap_compare(make_app(scenes.history(ampere_node)), terminal_size=SMALL, run_before=two_frames)
