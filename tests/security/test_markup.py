"""Names from outside are never read as Textual markup: ``[/x]`` in a GPU's or a process's name raised
MarkupError from a border title and closed the dashboard; ``[link=…]`` made a link. Shown as written instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual.widgets._toast import Toast

from gputop.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.widgets.gpu_card import GpuCard
from gputop.ui.widgets.training_panel import TrainingPanel
from tests.factories import settle
from tests.ui import scenes
from tests.ui.conftest import make_app  # noqa: F401
from tests.ui.training_scenes import JOB_PID, starved_job

GPU_NAME = "NVIDIA [/x][link=https://example.invalid]H100[/link]"
PROCESS_NAME = "[/oops][b]python"


def hostile(t: float = scenes.T0) -> Snapshot:
    snap = starved_job(t)
    gpus = tuple(replace(g, name=GPU_NAME) for g in snap.gpus)
    training = tuple(replace(v, name=PROCESS_NAME) for v in snap.training)
    hosts = tuple(replace(h, name=PROCESS_NAME) if h.pid == JOB_PID else h for h in snap.host_processes)
    processes = tuple(replace(p, host=replace(p.host, name=PROCESS_NAME)) if p.host else p for p in snap.processes)
    return replace(snap, gpus=gpus, training=training, host_processes=hosts, processes=processes)


async def test_markup_in_gpu_and_process_names_is_shown_as_text(
    make_app: Callable[..., GputopApp],  # noqa: F811
) -> None:
    app = make_app(scenes.history(hostile, ticks=5), focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        card = app.screen.query_one(GpuCard)
        assert card.border_title is not None and "[/x]" in card.border_title.replace("\\[", "[")
        panel = app.screen.query_one(TrainingPanel)
        assert panel.border_title is not None and "[/oops][b]python" in panel.border_title.replace("\\[", "[")
        await pilot.press("slash", *"[/f]", "enter")  # the filter's text is in the table's title too
        await pilot.pause()
        assert app.is_running


async def test_the_border_shows_the_brackets_literally(
    make_app: Callable[..., GputopApp],  # noqa: F811
) -> None:
    app = make_app(scenes.history(hostile, ticks=5), focus_pid=JOB_PID)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.export_screenshot()
        assert "[/x][link=https://example.invalid]H100[/link]" in screen.replace("&#160;", " ")


async def test_a_remote_host_with_markup_in_its_name_and_its_gpus_names_stays_on_screen() -> None:
    from gputop.remote.hostspec import HostSpec
    from gputop.remote.status import LIVE, HostEvent, HostStatus
    from gputop.ui.hosts.app import hosts_app
    from gputop.ui.hosts.section import HostSection
    from tests.remote.host_scenes import ScriptedFleet

    name = "gpu[/x]box"
    snaps = [replace(s, gpus=tuple(replace(g, name=GPU_NAME) for g in s.gpus)) for s in scenes.history(hostile, 3)]
    events = [HostEvent(HostStatus(name, LIVE, since=scenes.T0, last_snapshot_at=s.time), s) for s in snaps]
    fleet = ScriptedFleet(specs=[HostSpec(name)], events=events, now=snaps[-1].time)
    app = hosts_app(fleet, user="alice")  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        section = app.screen.query_one(HostSection)
        assert section.border_title is not None and name in section.border_title.replace("\\[", "[")
        await pilot.press("enter")  # the host's own dashboard: its GPU cards carry the remote GPU names
        await pilot.pause()
        card = app.screen.query_one(GpuCard)
        assert card.border_title is not None and "[/x]" in card.border_title.replace("\\[", "[")
        assert app.is_running


async def test_a_notification_holding_a_name_from_outside_is_plain_text(
    make_app: Callable[..., GputopApp],  # noqa: F811
) -> None:
    host = "node[/y][link=https://example.invalid]7[/link]"
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        app.notify(f"{host} has sent no snapshot yet", title="Hosts", severity="warning")
        await settle(pilot, lambda: app.screen.query(Toast), "the notification")
        assert app.is_running
        (toast,) = app.screen.query(Toast)
        assert f"{host} has sent no snapshot yet" in str(toast.render())
