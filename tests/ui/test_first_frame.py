"""The dashboard's first frame: drawn once the snapshot it has is on every panel, never empty cards filled later.

The live dashboard has its first snapshot before Textual starts (the plain first frame made it), so the first frame
Textual paints can carry all of it. Frames are taken where Textual hands each one to the terminal (``App._display``,
the one place it paints; the headless driver of ``run_test`` writes nothing, but the frame is made all the same)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from rich.console import Console, RenderableType
from textual.screen import Screen

from gputop.ui.app import GputopApp
from tests.ui import scenes

MakeApp = Callable[..., GputopApp]


def text_of(frame: RenderableType, size: tuple[int, int]) -> str:
    console = Console(width=size[0], height=size[1], file=io.StringIO(), record=True, legacy_windows=False)
    console.print(frame)
    return console.export_text()


async def first_and_settled(app: GputopApp, size: tuple[int, int]) -> tuple[str, str]:
    """The text of the first frame ``app`` paints, and of its screen once everything it started with has run."""
    frames: list[RenderableType] = []
    display = app._display

    def painted(screen: Screen[object], frame: RenderableType | None) -> None:
        if frame is not None and screen is app.screen:
            frames.append(frame)
        display(screen, frame)

    app._display = painted  # type: ignore[method-assign]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        settled = app.screen._compositor.render_update(full=True)  # what export_screenshot draws
        assert frames and settled is not None
        return text_of(frames[0], size), text_of(settled, size)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["cards", "compact"])
async def test_the_first_frame_is_the_screen_the_dashboard_settles_on(make_app: MakeApp, size: tuple[int, int]) -> None:
    first, settled = await first_and_settled(make_app([scenes.training_node()]), size)

    assert first == settled


async def test_the_first_frame_shows_each_gpus_readings_in_its_card(make_app: MakeApp) -> None:
    snap = scenes.training_node()
    first, _ = await first_and_settled(make_app([snap]), (160, 48))

    assert "╭─ 0  NVIDIA H100 80GB HBM3" in first
    assert "MEM  ████████████████████░░░░░░░ 60.0GiB / 80.0GiB  75%" in first
    assert "BUSY ██████░░░░░░░░░░░░░░░░░░░░░  22%   mem ctrl 10%" in first
    assert "? Help" in first
