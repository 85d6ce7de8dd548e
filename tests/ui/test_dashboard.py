"""The overview screen driven by keys: what each key does, and that live updates leave the cursor alone."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop import startup
from gputop.advisor import Advisor
from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.feed import LiveFeed
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.detail import ProcessDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets.banner import Banner
from gputop.ui.widgets.gpu_card import GpuCard
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.process_table import ProcessTable
from gputop.ui.widgets.status_bar import StatusBar
from tests.factories import DEADLINE_S
from tests.ui import scenes
from tests.ui.conftest import USER

MakeApp = Callable[..., GputopApp]


def table(app: GputopApp) -> ProcessTable:
    return app.screen.query_one(ProcessTable)


def shown_pids(app: GputopApp) -> list[int]:
    return [int(table(app).cells_at(i)[1]) for i in range(table(app).row_count)]


def selected_pid(app: GputopApp) -> int | None:
    row = table(app).selected
    return None if row is None else row.pid


async def test_overview_shows_every_gpu_and_gpu_process(make_app: MakeApp) -> None:
    app = make_app(scenes.history(scenes.training_node, ticks=3))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert len(app.screen.query(GpuCard)) == 8
        assert table(app).row_count == len(scenes.training_node().processes)


async def test_the_collector_held_at_launch_resumes_once_the_first_frame_is_drawn(make_app: MakeApp) -> None:
    """``gputop`` holds the garbage collector while it starts (``gputop.startup``): the dashboard, which runs as
    long as the user keeps it, must give it back, or reference cycles would never be freed."""
    app = make_app([scenes.training_node()])
    startup.hold()
    try:
        assert not gc.isenabled()
        async with app.run_test() as pilot:
            await pilot.pause()
            assert gc.isenabled()
            assert gc.get_freeze_count() > 0
    finally:
        startup.resume()
        gc.unfreeze()
        gc.enable()


async def test_q_quits(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test() as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert app.feed.source.stopped  # type: ignore[attr-defined]


class SlowToStop(scenes.ScriptedSource):
    """A source whose ``stop`` waits until let go, as the live sampler's waits out NVML's close: which thread
    stopped it, and how many times."""

    def __init__(self, snapshots: list[Snapshot]) -> None:
        super().__init__(snapshots)
        self.stopped_on: list[str] = []
        self.stopping = threading.Event()
        self.let_go = threading.Event()

    def stop(self) -> None:
        self.stopped_on.append(threading.current_thread().name)
        self.stopping.set()
        assert self.let_go.wait(DEADLINE_S)
        super().stop()


async def test_q_starts_stopping_the_feed_beside_textuals_way_out_and_waits_for_it() -> None:
    source = SlowToStop([scenes.training_node()])
    app = GputopApp(LiveFeed(source, Advisor()), user=USER)
    async with app.run_test() as pilot:
        await pilot.pause()
        app.exit()  # what q does
        # Still on the UI thread, right after exit(): the source is already stopping, on a thread of its own
        assert source.stopping.wait(DEADLINE_S)
        assert source.stopped_on == ["gputop-feed-stop"]
        assert not source.stopped
        source.let_go.set()
    assert source.stopped  # the dashboard's way out waited for it
    assert source.stopped_on == ["gputop-feed-stop"]  # once: the stops that follow wait for that one


async def test_question_mark_lists_every_key_and_closes_again(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_p_freezes_the_display_and_says_so(make_app: MakeApp) -> None:
    source_snaps = [scenes.training_node(scenes.T0 - 2)]
    app = make_app(source_snaps)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        app.feed.source.push(scenes.training_node(scenes.T0))  # type: ignore[attr-defined]
        await pilot.pause()
        status = app.screen.query_one(StatusBar)
        assert status.view.paused
        assert status.view.clock == "12:13:18"
        assert "PAUSED" in status.render_line(0).text
        await pilot.press("p")
        await pilot.pause()
        assert not status.view.paused
        assert status.view.clock == "12:13:20"


async def test_plus_and_minus_change_the_interval_but_never_below_a_tenth(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test() as pilot:
        await pilot.press("plus")
        assert app.interval_s == 2.0
        for _ in range(8):
            await pilot.press("minus")
        assert app.interval_s == 0.1
        assert app.feed.source.intervals[0] == 2.0  # type: ignore[attr-defined]
        assert app.feed.source.intervals[-1] == 0.1  # type: ignore[attr-defined]
        assert "every 0.1s" in app.screen.query_one(StatusBar).render_line(0).text


async def test_s_sorts_by_the_next_column_and_r_reverses(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("s")  # GPU -> PID
        await pilot.pause()
        assert shown_pids(app) == sorted(shown_pids(app))
        await pilot.press("r")
        await pilot.pause()
        assert shown_pids(app) == sorted(shown_pids(app), reverse=True)
        assert "sort PID ▼" in str(table(app).border_title)


async def test_clicking_a_column_title_sorts_by_it(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        gpu_mem_title = (5 + 9 + 9 + 5 + 2, 1)  # past GPU, PID, USER and C/G with their padding; below the border
        await pilot.click(ProcessTable, offset=gpu_mem_title)
        await pilot.pause()
        memory = {(p.gpu_index, p.pid): p.gpu_memory_bytes for p in scenes.training_node().processes}
        shown = [memory[(int(r[0]), int(r[1]))] for r in map(table(app).cells_at, range(table(app).row_count))]
        assert shown == sorted(shown, reverse=True)
        assert "sort GPU MEM ▼" in str(table(app).border_title)


async def test_slash_filters_by_text_and_escape_clears(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("slash", *"ipykernel", "enter")
        await pilot.pause()
        assert shown_pids(app) == [scenes.NOTEBOOK_PID]
        assert 'filter "ipykernel"' in str(table(app).border_title)
        assert table(app).has_focus
        await pilot.press("escape")
        await pilot.pause()
        assert table(app).row_count == len(scenes.training_node().processes)


async def test_a_filter_that_matches_nothing_says_so(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("slash", *"nosuchthing", "enter")
        await pilot.pause()
        assert table(app).row_count == 0
        assert "No process matches" in str(app.screen.query_one("#process-note").content)


async def test_c_shows_compute_processes_only(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        await pilot.pause()
        assert scenes.XORG_PID not in shown_pids(app)
        assert "compute only" in str(table(app).border_title)


async def test_m_shows_my_processes_only(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        assert set(shown_pids(app)) == set(scenes.RANK_PIDS)


async def test_t_shows_parents_children_and_marked_dataloader_workers(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        pids = shown_pids(app)
        assert scenes.TORCHRUN_PID in pids
        rank0 = pids.index(scenes.RANK_PIDS[0])
        assert pids[rank0 + 1 : rank0 + 3] == [4200, 4201]
        worker_command = table(app).cells_at(rank0 + 1)[-1]
        assert "pt_data_worker" in worker_command
        assert "DataLoader worker" in worker_command
        assert worker_command.lstrip("│ ").startswith(("├─", "└─"))


async def test_cursor_and_scroll_stay_put_while_rows_update(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node(scenes.T0 - 10)])
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        for _ in range(table(app).row_count - 1):
            await pilot.press("down")
        before = selected_pid(app)
        scroll = table(app).scroll_y
        assert scroll > 0
        for t in range(9, -1, -1):
            app.feed.source.push(scenes.training_node(scenes.T0 - t))  # type: ignore[attr-defined]
            await pilot.pause()
            assert selected_pid(app) == before
            assert table(app).scroll_y == scroll


async def test_the_cursor_follows_its_process_when_the_order_changes(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("down")
        chosen = selected_pid(app)
        await pilot.press("s", "s", "s", "s")  # sort by GPU memory: a different order
        await pilot.pause()
        assert selected_pid(app) == chosen


async def test_enter_opens_the_process_detail_and_escape_returns(make_app: MakeApp) -> None:
    app = make_app(scenes.history(scenes.training_node, ticks=5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        chosen = selected_pid(app)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen)
        assert app.screen.pid == chosen
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert selected_pid(app) == chosen


async def test_no_driver_still_shows_the_host_and_the_reason(make_app: MakeApp) -> None:
    app = make_app([scenes.no_driver()])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        banner = app.screen.query_one(Banner)
        assert banner.display
        assert "libnvidia-ml.so.1 not found" in banner.messages[0]
        assert "no NVIDIA driver" in app.screen.query_one(StatusBar).render_line(0).text
        assert "No GPU processes" in str(app.screen.query_one("#process-note").content)


async def test_a_lost_gpu_is_an_error_card_with_its_reason(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node(lost=[scenes.LOST_GPU_INDEX])])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        card = app.screen.query_one(f"#gpu-{scenes.LOST_GPU_INDEX}", GpuCard)
        assert card.has_class("-lost")
        assert "LOST" in str(card.border_title)
        assert scenes.LOST_REASON in card.render_line(0).text


async def test_80x24_switches_to_one_line_per_gpu(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert all(card.compact for card in app.screen.query(GpuCard))
        assert table(app).row_count > 0
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not any(card.compact for card in app.screen.query(GpuCard))


async def test_64_gpus_at_160x48_all_on_screen_two_to_a_line(make_app: MakeApp) -> None:
    app = make_app([scenes.many_gpus_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(GpuPanel)
        cards = list(app.screen.query(GpuCard))
        assert len(cards) == scenes.MANY_GPUS
        assert all(card.compact for card in cards)
        # Every GPU's line is inside the panel's visible area: nothing scrolled away or cut off below.
        assert all(panel.content_region.contains_region(card.region) for card in cards)
        assert cards[1].region.y == cards[0].region.y and cards[1].region.x > cards[0].region.x
        assert scenes.SWEEP_PID + 63 in {row.pid for row in table(app)._rows}
        assert table(app).size.height >= 8
        screen_text = "\n".join(app.screen._compositor.render_strips()[y].text for y in range(48))
        for index in range(scenes.MANY_GPUS):
            assert f"{index:>2} H100 80GB HBM3" in screen_text


async def test_gpus_that_do_not_fit_scroll_with_keys(make_app: MakeApp) -> None:
    app = make_app([scenes.many_gpus_node()])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(GpuPanel)
        last = app.screen.query_one(f"#gpu-{scenes.MANY_GPUS - 1}", GpuCard)
        assert not panel.content_region.contains_region(last.region)
        await pilot.press("tab")
        assert app.focused is panel
        await pilot.press("end")
        await pilot.pause()
        assert panel.content_region.contains_region(last.region)
        await pilot.press("home")
        await pilot.pause()
        assert panel.scroll_y == 0
        await pilot.press("tab")
        assert isinstance(app.focused, ProcessTable)


async def test_ctrl_c_quits_too(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test() as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


async def test_no_color_keeps_the_cursor_visible(make_app: MakeApp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.no_color
        cursor_row = table(app).render_line(1)
        assert all(segment.style and segment.style.reverse for segment in cursor_row if segment.text.strip())


def test_the_docs_list_every_key(make_app: MakeApp) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "ui.md").read_text()
    for keys, _ in make_app([]).key_help():
        assert f"`{keys}`" in docs or keys in docs, keys


class BrokenAdvisor:
    """An advisor whose rules have a bug."""

    def update(self, snap: object) -> tuple[()]:
        raise RuntimeError("a rule divided by zero")


async def test_a_failing_advisor_leaves_the_dashboard_running(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node(), scenes.training_node()], advisor=BrokenAdvisor())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert app.is_running
        assert shown_pids(app)
