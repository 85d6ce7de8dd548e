"""The multi-host view read from a real Prometheus (Debian's ``prometheus``) scraping three ``gputop export``
instances on loopback, each over its own fake driver, and a fourth target where nothing listens: every host with
its GPUs, the fourth down from the start, and a host whose exporter stops shown as stale with the age of its last
sample."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gputop.formatting import fmt_age
from gputop.model import DriverInfo, HostInfo, Snapshot
from gputop.remote.prometheus.query import http_query
from gputop.remote.prometheus.readings import read_fleet
from gputop.remote.prometheus.source import PrometheusFleet, run_queries
from gputop.remote.status import LIVE, STALE, UNREACHABLE, HostStatus
from gputop.ui.hosts.app import hosts_app
from gputop.ui.hosts.section import HostSection, HostSummary
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import job_lines, jobs_across, section_lines
from tests.conftest import FakeDriver
from tests.export.conftest import Exporter, start_exporter
from tests.factories import DEADLINE_S, wait_until
from tests.machines import GIB, training_box
from tests.prometheus_server import PROMETHEUS, Prometheus, free_port, start_prometheus

GPUS = (2, 1, 4)
"""The GPUs of each of the three hosts, in the order of their exporters."""
TRAINING_PIDS = (4242, 4243)
"""The first host's compute processes; its exporter runs with ``--per-process``."""


@dataclass
class Fleet:
    prometheus: Prometheus
    exporters: list[Exporter]
    never_up: str
    """A target of the gputop job where no exporter ever listened."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus.port}"

    def fleet(self) -> PrometheusFleet:
        return PrometheusFleet(self.url, http_query(self.url), interval_s=0.5)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[Fleet]:
    """Three exporters (2, 1 and 4 fake H100s; the first with two processes, per process) and Prometheus scraping
    them every second until it holds every GPU of all three."""
    if not os.path.exists(PROMETHEUS):
        pytest.skip(f"{PROMETHEUS} is absent: install Debian's prometheus package (scripts/test does)")
    tmp = tmp_path_factory.mktemp("fleet")
    exporters: list[Exporter] = []
    server: Prometheus | None = None
    ranks = [start_rank(rank) for rank in (0, 1)]
    try:
        for n, gpus in enumerate(GPUS):
            driver = FakeDriver(tmp / f"state-{n}.txt", "r550")
            pids = TRAINING_PIDS if n == 0 else (ranks[n - 1].pid,)
            driver.write(training_box(gpus, pids))
            extra = ("--per-process",) if n == 0 else ()
            exporters.append(start_exporter(driver, "--listen", "127.0.0.1:0", *extra))
        never_up = f"127.0.0.1:{free_port()}"
        server = start_prometheus(tmp, {"gputop": [*(e.address for e in exporters), never_up]})
        running = server

        def all_gpus() -> bool | None:
            scraped_all = len(running.vector("gputop_gpu_sm_activity_ratio") or ()) == sum(GPUS)
            ranks_seen = len(running.vector("gputop_training_job_info") or ()) == 2
            return (scraped_all and ranks_seen and bool(running.vector("up == 0"))) or None

        try:
            wait_until(all_gpus, "Prometheus to hold every GPU of the three exporters")
        except AssertionError:
            pytest.fail(f"Prometheus did not scrape the exporters:\n{server.log.read_text()[-3000:]}")
        yield Fleet(server, exporters, never_up)
    finally:
        if server is not None:
            server.stop()
        for exporter in exporters:
            exporter.stop()
        for process in ranks:
            process.kill()
            process.wait()


def start_rank(rank: int) -> subprocess.Popen[bytes]:
    """A process that is rank ``rank`` of a two-rank torchrun run by its environment, as torchrun starts one."""
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2", TORCHELASTIC_RUN_ID="fleet-run")
    env.update(MASTER_ADDR="10.0.0.1", MASTER_PORT="29500")
    return subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(600)"], env=env)


def test_every_host_prometheus_scrapes_is_read_with_its_gpus_and_processes(scraped):
    readings, left_out = read_fleet(run_queries(http_query(scraped.url)))

    by_name = {r.name: r.snapshot for r in readings}
    assert left_out == 0
    assert set(by_name) == {e.address for e in scraped.exporters}
    for exporter, gpus in zip(scraped.exporters, GPUS):
        snap = by_name[exporter.address]
        assert [g.index for g in snap.gpus] == list(range(gpus))
        assert all(g.name == "NVIDIA H100 80GB HBM3" and g.memory_total_bytes == 80 * GIB for g in snap.gpus)
    first = by_name[scraped.exporters[0].address]
    assert sorted((p.pid, p.gpu_index, p.gpu_memory_bytes) for p in first.processes) == [
        (4242, 0, 6 * GIB),
        (4243, 1, 6 * GIB + 1024**2),
    ]
    assert first.gpus[0].memory_used_bytes == 20 * GIB


async def test_the_fleet_view_shows_all_three_hosts_live_with_their_gpus(scraped):
    fleet = scraped.fleet()
    fleet.discover()
    app = hosts_app(fleet, interval_s=0.5, readonly=True)
    async with app.run_test(size=(160, 48)) as pilot:
        summary = app.screen.query_one(HostSummary)

        async def lines() -> list[str]:
            await pilot.pause(0.1)
            return [line.plain for line in summary.text_lines(160)]

        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and sum(" live " in line for line in await lines()) < 3:
            pass
        rows = {line[2:].split()[0]: line[2:].split()[1:3] for line in (await lines())[1:]}
        live = {e.address: ["live", str(gpus)] for e, gpus in zip(scraped.exporters, GPUS)}
        assert {name: row for name, row in rows.items() if name != scraped.never_up} == live
        assert rows[scraped.never_up][0] == "unreachable"
        assert len(app.screen.query(HostSection)) == 4
    fleet.stop()


def test_a_target_down_before_it_gave_any_series_is_shown_down_with_why_from_the_start(scraped):
    fleet = scraped.fleet()

    fleet.discover()

    (status,) = [s for s in fleet._statuses.values() if s.name == scraped.never_up]
    assert status.state == UNREACHABLE and "up == 0" in status.reason
    reason, info = section_text(status, status.since + 75)[:2]
    assert "Prometheus cannot scrape it (up == 0)" in reason
    assert f"down for {fmt_age(75)}" in info
    fleet.stop()


def test_the_ranks_of_one_job_on_two_hosts_are_one_job_across_them(scraped):
    readings, _ = read_fleet(run_queries(http_query(scraped.url)))

    (job,) = jobs_across([(r.name, r.snapshot) for r in readings])

    assert job.world_size == 2
    assert sorted((r.rank, r.host) for r in job.ranks) == [
        (0, scraped.exporters[1].address),
        (1, scraped.exporters[2].address),
    ]
    (line,) = job_lines((job,), 200, Palette())
    assert "2 ranks on" in line.plain


def test_a_host_whose_exporter_stops_is_stale_with_the_age_of_its_last_sample(scraped):
    fleet = scraped.fleet()
    statuses = {e.name: e.status for e in fleet.refresh(run_queries(fleet.query))}
    gone = scraped.exporters[2].address
    assert statuses[gone].state == LIVE
    scraped.exporters[2].stop()
    stopped_at = time.time()

    def stale() -> bool | None:
        statuses.update((e.name, e.status) for e in fleet.refresh(run_queries(fleet.query)))
        return statuses[gone].state == STALE or None

    wait_until(stale, "the stopped exporter's host to turn stale")
    now = time.time()
    last = statuses[gone].last_snapshot_at
    assert last is not None and stopped_at - 5 < last <= stopped_at  # its last scrape, before it stopped
    assert statuses[gone].shown_state(now) == STALE
    assert {name: s.state for name, s in statuses.items() if name not in (gone, scraped.never_up)} == {
        e.address: LIVE for e in scraped.exporters[:2]
    }
    [section] = [line for line in section_text(statuses[gone], now) if "no update for" in line]
    assert f"no update for {fmt_age(now - last)}" in section


def section_text(status: HostStatus, now: float) -> list[str]:
    snap = Snapshot(now, HostInfo(status.name, None, (), 0, 0, None, 0, 0, 0, 0, 0), DriverInfo("ok"))
    return [line.plain for line in section_lines(status, snap, None, now, 160, Palette())]
