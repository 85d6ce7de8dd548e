"""htop's and nvitop's keys do what they do there, where gputop has the same thing; any other key says that it did
nothing, in the footer; the footer keeps its keys, the help key always, at any width."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Input, Label, OptionList
from textual.widgets._footer import FooterKey

from gputop.ui.app import GputopApp
from gputop.ui.keys import unbound_words
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.signal_dialog import SignalDialog
from gputop.ui.screens.sort import SortScreen
from gputop.ui.widgets import footer as footer_module
from gputop.ui.widgets.footer import Footer, ShownKey, fitted
from gputop.ui.widgets.process_table import ProcessTable
from tests.ui import scenes
from tests.ui.mig_scenes import mig_node
from tests.ui.training_scenes import JOB_PID, starved_job

MakeApp = Callable[..., GputopApp]


def dashboard(app: GputopApp) -> DashboardScreen:
    assert isinstance(app.screen, DashboardScreen)
    return app.screen


def sort_key(app: GputopApp) -> tuple[str, bool]:
    options = dashboard(app).options
    return options.sort_key, options.reverse


def footer_text(app: GputopApp) -> str:
    """The footer's words as drawn: its keys (those on screen) or its note."""
    footer = app.screen.query_one(Footer)
    keys = [str(k.render()) for k in footer.query(FooterKey) if k.region.right <= app.size.width]
    return " ".join(keys) + " ".join(str(label.render()) for label in footer.query(Label))


async def press(app: GputopApp, pilot, *keys: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    await pilot.press(*keys)
    await pilot.pause()


async def test_f1_lists_every_key_and_f10_quits(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "f1")
        assert isinstance(app.screen, HelpScreen)
        await press(app, pilot, "escape", "f10")
    assert app.return_code == 0


@pytest.mark.parametrize("key", ["f3", "f4"])
async def test_f3_and_f4_open_the_filter_as_slash_does(make_app: MakeApp, key: str) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, key, *"ipykernel", "enter")
        assert app.screen.query_one("#filter", Input).value == "ipykernel"
        assert dashboard(app).options.filter_text == "ipykernel"


async def test_f5_shows_the_tree(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "f5")
        assert dashboard(app).options.tree
        await press(app, pilot, "f5")
        assert not dashboard(app).options.tree


async def test_m_sorts_by_gpu_memory_in_one_press_and_p_by_cpu(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await press(app, pilot, "M")
        assert sort_key(app) == ("gpu_mem", False)
        assert "sort GPU MEM ▼" in str(app.screen.query_one(ProcessTable).border_title)
        await press(app, pilot, "P")
        assert sort_key(app) == ("cpu", False)


async def test_less_and_greater_than_move_the_sort_column_and_capital_i_inverts(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await press(app, pilot, "greater_than_sign")
        assert sort_key(app) == ("pid", False)
        await press(app, pilot, "less_than_sign", "less_than_sign")
        assert sort_key(app) == ("command", False)  # left of the first column: round to the last
        await press(app, pilot, "I")
        assert sort_key(app) == ("command", True)


async def test_f6_chooses_the_sort_column_from_a_list(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(80, 24)) as pilot:
        await press(app, pilot, "f6")
        assert isinstance(app.screen, SortScreen)
        options = app.screen.query_one(OptionList)
        assert options.highlighted == 0  # the sorted column, GPU
        await press(app, pilot, *["down"] * 3, "enter")  # GPU, PID, USER, GPU MEM (no C/G below 100 columns)
        assert sort_key(app) == ("gpu_mem", False)
        await press(app, pilot, "f6", "down", "escape")
        assert sort_key(app) == ("gpu_mem", False)


async def test_the_sort_keys_move_on_from_a_column_only_some_tables_have(make_app: MakeApp) -> None:
    app = make_app([mig_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await press(app, pilot, "f6", "down", "enter")  # GPU, then MIG: the column after it
        assert sort_key(app) == ("mig", False)
        await press(app, pilot, "s")
        assert sort_key(app) == ("pid", False)
        await press(app, pilot, "less_than_sign", "less_than_sign")
        assert sort_key(app) == ("gpu", False)


async def test_f9_asks_before_a_signal_as_k_does(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "f9")
        assert isinstance(app.screen, SignalDialog)


async def test_a_key_gputop_does_not_know_says_so_in_the_footer_for_a_moment(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(footer_module, "NOTE_S", 0.5)
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "f2")
        assert "F2 is not a gputop key · ? lists every key" in footer_text(app)
        await pilot.pause(1.0)
        assert "is not a gputop key" not in footer_text(app)
        assert "? Help" in footer_text(app)


async def test_a_key_that_does_not_apply_now_says_so(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])  # no training process: l has nothing to open
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "l")
        assert "l (Training) does not apply here now" in footer_text(app)


async def test_a_bound_key_says_nothing(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40)) as pilot:
        await press(app, pilot, "t")
        assert not app.screen.query_one(Footer).query(Label)


def test_the_help_lists_the_habits_of_htop_and_nvitop(make_app: MakeApp) -> None:
    help_text = "\n".join(f"{keys} {what}" for keys, what in make_app([]).key_help())
    for words in ("F10 too", "F1 too", "F3, F4 too", "F5 too", "F6", "F9 too", "I too"):
        assert words in help_text, words
    rows = dict(make_app([]).key_help())
    assert rows["M"] == "Sort by GPU memory, largest first"
    assert rows["P"] == "Sort by %CPU, largest first"
    assert rows["< >"].startswith("Sort by the column to the left")


@pytest.mark.fast
def test_an_unknown_function_key_is_named_in_capitals() -> None:
    assert unbound_words("f2", "f2", {}) == "F2 is not a gputop key · ? lists every key"
    assert unbound_words("x", "x", {"x": ""}) == "x does not apply here now · ? lists every key"


# -- the footer's width ----------------------------------------------------------------------------------------


def key(display: str, description: str, action: str = "") -> ShownKey:
    return ShownKey(display, display, description, action or description.lower(), True, "")


@pytest.mark.fast
def test_keys_that_fit_keep_the_roomy_style() -> None:
    keys = [key("q", "Quit"), key("?", "Help")]
    assert fitted(keys, 80) == (False, tuple(keys))


@pytest.mark.fast
def test_a_narrow_footer_goes_compact_then_drops_keys_from_the_end_but_never_help_or_quit() -> None:
    keys = [key("⏎", "Details"), key("/", "Filter"), key("q", "Quit"), key("?", "Help"), key("p", "Pause")]
    compact, shown = fitted(keys, 24)
    assert compact
    assert [k.display for k in shown] == ["⏎", "q", "?"]


@pytest.mark.parametrize("size", [(80, 24), (60, 24)])
async def test_the_footer_fits_and_keeps_the_help_key(make_app: MakeApp, size: tuple[int, int]) -> None:
    app = make_app(scenes.history(starved_job, ticks=3), focus_pid=JOB_PID)  # l for the training screen too
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        shown = list(app.screen.query_one(Footer).query(FooterKey))
        assert shown and all(k.region.right <= size[0] for k in shown)
        assert "? Help" in footer_text(app)
        if size[0] == 80:
            assert {k.action for k in shown} >= {"training", "signal", "toggle_pause", "quit", "help"}


async def test_the_footer_follows_a_resize(make_app: MakeApp) -> None:
    app = make_app(scenes.history(starved_job, ticks=3), focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        assert not footer.compact
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert footer.compact
        assert all(k.region.right <= 80 for k in footer.query(FooterKey))
