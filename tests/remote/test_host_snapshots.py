"""Pictures of the multi-host view from fixed hosts, compared with the accepted SVGs in ``__snapshots__``.

Update after a deliberate change with ``pytest tests/remote/test_host_snapshots.py --snapshot-update`` and look at
the new pictures (``scripts/screenshots hosts-overview hosts-80x24 hosts-drill-down`` renders them as PNG).
"""

from __future__ import annotations

import pytest

from gputop.ui.app import GputopApp
from gputop.ui.hosts.app import hosts_app
from tests.remote import host_scenes, prometheus_scenes
from tests.ui.test_snapshots import LARGE, SMALL, two_frames


def three_hosts() -> GputopApp:
    return hosts_app(host_scenes.ScriptedFleet(events=host_scenes.events()), user="alice")


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_three_hosts_one_of_them_down(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(three_hosts(), terminal_size=size, run_before=two_frames)


def test_the_dead_host_selected(snap_compare) -> None:
    assert snap_compare(three_hosts(), terminal_size=(120, 40), press=["down", "down"], run_before=two_frames)


def test_one_host_opened(snap_compare) -> None:
    assert snap_compare(three_hosts(), terminal_size=SMALL, press=["down", "enter"], run_before=two_frames)


def test_one_job_on_two_training_nodes(snap_compare) -> None:
    fleet = host_scenes.ScriptedFleet(host_scenes.TWO_NODE_SPECS, events=host_scenes.two_node_events())
    assert snap_compare(hosts_app(fleet, user="alice"), terminal_size=LARGE, run_before=two_frames)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_a_fleet_read_from_prometheus_with_a_stale_host(snap_compare, size: tuple[int, int]) -> None:
    app = hosts_app(prometheus_scenes.prometheus_fleet(), user="alice")
    assert snap_compare(app, terminal_size=size, run_before=two_frames)
