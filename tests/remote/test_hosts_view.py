"""The multi-host view over scripted hosts: the summary, the sections, drilling into one host and back."""

from __future__ import annotations

from dataclasses import replace

from rich.style import Style

from gputop.remote.hostspec import HostSpec
from gputop.remote.status import CONNECTING, DROPPED, LIVE, HostEvent, HostStatus
from gputop.ui.app import GputopApp
from gputop.ui.hosts.app import hosts_app
from gputop.ui.hosts.screens import HostDashboardScreen, HostsScreen
from gputop.ui.hosts.section import HostSection, HostSummary
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.signal_dialog import SignalDialog
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import (
    busiest,
    fmt_power,
    host_totals,
    section_lines,
    summary_header,
    summary_layout,
    summary_line,
)
from gputop.ui.widgets.banner import Banner
from gputop.ui.widgets.status_bar import StatusBar
from tests.remote import host_scenes
from tests.remote.host_scenes import DEAD_HOST, NOW, SERVING_HOST, TRAINING_HOST, ScriptedFleet
from tests.ui import scenes

PLAIN = Palette()


def lines_of(widget: HostSummary | HostSection) -> list[str]:
    return [line.plain for line in widget.text_lines(widget.content_size.width)]


def make_app(events: list[HostEvent] | None = None, **options: object) -> GputopApp:
    fleet = ScriptedFleet(events=host_scenes.events(ticks=3) if events is None else events)
    return hosts_app(fleet, user="alice", **options)  # type: ignore[arg-type]


def test_totals_sum_up_a_hosts_gpus() -> None:
    snap = scenes.training_node(lost=[3])
    totals = host_totals(snap)
    assert (totals.gpus, totals.lost) == (8, 1)
    readable = [g for g in snap.gpus if g.index != 3]
    assert totals.busy_percent == sum(g.utilization_gpu_percent for g in readable) / 7
    assert totals.memory_total_bytes == 7 * 80 * scenes.GIB
    assert totals.hottest_c == 87.0
    assert totals.power_w == sum(g.power_w for g in readable)
    assert totals.top == busiest(snap.processes, 1)[0]
    assert totals.top.sm_percent == max(p.sm_percent for p in snap.processes if p.sm_percent is not None)
    assert busiest(snap.processes, 20)[-1].sm_percent is None  # unknown last, never as a zero
    assert (fmt_power(None), fmt_power(698.0), fmt_power(4567.0)) == ("N/A", "698W", "4.57kW")


def test_every_summary_line_fits_and_a_down_host_says_why_and_when() -> None:
    snap = scenes.training_node()
    live = HostStatus(TRAINING_HOST, LIVE, last_snapshot_at=NOW - 2, stale_after_s=5)
    dead = host_scenes.dead_status()
    for width in (80, 120, 160):
        layout = summary_layout([TRAINING_HOST, DEAD_HOST], width)
        header = summary_header(layout, width, PLAIN)
        line = summary_line(TRAINING_HOST, live, snap, NOW, layout, width, PLAIN)
        down = summary_line(DEAD_HOST, dead, None, NOW, layout, width, PLAIN)
        assert max(header.cell_len, line.cell_len, down.cell_len) <= width
        assert line.plain.split()[:3] == [TRAINING_HOST, "live", "8"]
        assert line.plain.rstrip().endswith("2s") or "2s  alice" in line.plain
        assert down.plain.split()[:2] == [DEAD_HOST, "unreachable"]
    wide = summary_line(DEAD_HOST, dead, None, NOW, summary_layout([DEAD_HOST], 160), 160, PLAIN)
    assert wide.plain.strip() == f"{DEAD_HOST} unreachable  connection timed out · retry in 16s"
    stale = summary_line(TRAINING_HOST, replace(live, last_snapshot_at=NOW - 9), snap, NOW, layout, 160, PLAIN)
    assert stale.plain.split()[1] == "stale"


def test_a_section_shows_gpus_and_busiest_processes_or_why_not() -> None:
    snap = scenes.training_node()
    live = HostStatus(TRAINING_HOST, LIVE, last_snapshot_at=NOW, stale_after_s=5)
    lines = [line.plain for line in section_lines(live, snap, None, NOW, 156, PLAIN)]
    assert lines[0].startswith("driver 550.90.07  CUDA 12.4   CPU")
    assert [line.split()[0] for line in lines[1:9]] == [str(i) for i in range(8)]
    assert lines[9].split()[:3] == ["GPU", "PID", "USER"]
    assert len(lines) == 1 + 8 + 1 + 3 + 1
    assert lines[-1] == f"… {len(snap.processes) - 3} more: ⏎ for all of them"
    assert all(len(line) <= 156 for line in lines)

    dead = [line.plain for line in section_lines(host_scenes.dead_status(), None, None, NOW, 156, PLAIN)]
    assert dead == [host_scenes.DEAD_REASON, "retry in 16s · 6 failed attempts · down for 4m"]
    first = HostStatus(DEAD_HOST, CONNECTING)
    assert [line.plain for line in section_lines(first, None, None, NOW, 80, PLAIN)] == ["connecting…"]


async def test_the_overview_has_a_line_and_a_section_per_host() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HostsScreen)
        summary = lines_of(app.screen.query_one(HostSummary))
        assert summary[0].split()[:3] == ["HOST", "STATE", "GPUS"]
        assert [line.split()[:3] for line in summary[1:]] == [
            ["▶", TRAINING_HOST, "live"],
            [SERVING_HOST, "live", "4"],
            [DEAD_HOST, "unreachable", "connection"],
        ]
        sections = list(app.screen.query(HostSection))
        assert [s.border_title for s in sections] == [
            f" {TRAINING_HOST} · live ",
            f" {SERVING_HOST} · live ",
            f" {DEAD_HOST} · unreachable ",
        ]
        assert sections[0].has_class("-selected") and sections[2].has_class("-down")
        assert "3 hosts: 2 live, 1 down" in app.screen.query_one(StatusBar).render_line(0).text


async def test_enter_opens_a_hosts_dashboard_readonly_and_escape_returns() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, HostDashboardScreen)
        assert app.feed.opened == SERVING_HOST
        assert app.snapshot is not None and app.snapshot.host.hostname == SERVING_HOST
        assert app.readonly
        await pilot.press("k")
        await pilot.pause()
        assert not isinstance(app.screen, SignalDialog)
        # Another host's snapshots do not reach the open one's dashboard; its own do.
        shown = app.snapshot
        app.feed.fleet.push(HostEvent(HostStatus(TRAINING_HOST, LIVE, last_snapshot_at=NOW), scenes.training_node()))
        await pilot.pause()
        assert app.snapshot is shown
        newer = host_scenes.serving_node(scenes.T0 + 2)
        app.feed.fleet.push(HostEvent(HostStatus(SERVING_HOST, LIVE, last_snapshot_at=NOW), newer))
        await pilot.pause()
        assert app.snapshot is newer
        # The host drops: the dashboard stays, and the banner says so first.
        down = HostStatus(SERVING_HOST, DROPPED, "connection to gpu-node-08 lost", NOW, NOW - 1, NOW + 1, 1, 5)
        app.feed.fleet.push(HostEvent(down))
        await pilot.pause()
        banner = app.screen.query_one(Banner).messages
        assert banner[0].startswith(f"{SERVING_HOST} is dropped: connection to gpu-node-08 lost · retry in 1s")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HostsScreen)
        assert app.feed.opened is None


async def test_a_host_without_a_snapshot_cannot_be_opened() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.click(f"#host-{2}")
        await pilot.pause()
        assert isinstance(app.screen, HostsScreen)
        assert app.screen.selected == 2
        assert any("has sent no snapshot yet" in str(n.message) for n in app._notifications)


async def test_clicking_a_summary_line_opens_that_host() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.click(HostSummary, offset=(5, 2))  # line 2: the second host
        await pilot.pause()
        assert isinstance(app.screen, HostDashboardScreen)
        assert app.feed.opened == SERVING_HOST


async def test_the_local_host_may_be_signalled_unless_readonly() -> None:
    local = HostSpec("local")
    event = HostEvent(HostStatus("local", LIVE, last_snapshot_at=NOW), scenes.training_node())
    for readonly in (False, True):
        app = hosts_app(ScriptedFleet([local], [event]), user="alice", readonly=readonly)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DashboardScreen)
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, SignalDialog) is not readonly


async def test_the_interval_is_fixed_and_help_lists_the_hosts_keys() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("plus")  # the scripted fleet fails the test if asked to change it
        assert app.interval_s == 1.0
        await pilot.press("minus")
        assert app.interval_s == 1.0
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = [k for k, _ in app.screen.keys]
        assert keys[:3] == ["↑", "↓", "⏎"] and "q" in keys and "+" not in keys


async def test_p_freezes_the_hosts_too() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        app.feed.fleet.push(HostEvent(HostStatus(SERVING_HOST, DROPPED, "lost", NOW, NOW, NOW + 1, 1, 5)))
        await pilot.pause()
        assert lines_of(app.screen.query_one(HostSummary))[2].split()[1] == "live"
        assert "PAUSED" in app.screen.query_one(StatusBar).render_line(0).text
        await pilot.press("p")
        await pilot.pause()
        assert lines_of(app.screen.query_one(HostSummary))[2].split()[1] == "dropped"


def test_styles_come_from_the_palette() -> None:
    red = Style(color="red")
    line = summary_line(
        DEAD_HOST, host_scenes.dead_status(), None, NOW, summary_layout([DEAD_HOST], 80), 80, Palette(crit=red)
    )
    assert any(span.style == red for span in line.spans)
