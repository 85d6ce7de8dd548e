"""A remote host's stream against the dashboard: whatever ``ssh HOST gputop stream --full`` writes (endless lines,
floods of snapshots, lines of the wrong types, escape sequences, nothing at all), the hosts view stays up, in
bounded time and memory, and shows what came as text, never as terminal commands.

The line reader and the stream are tested on their own with any bytes in any chunks, then through real processes:
a fake ``ssh`` (a script given as the ssh command, as ``GPUTOP_SSH`` would) that writes the attack.
"""

from __future__ import annotations

import itertools
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop.codec import snapshot_from_json, snapshot_json
from gputop.model import Snapshot
from gputop.remote.fleet import Fleet
from gputop.remote.hostspec import HostSpec
from gputop.remote.link import SshLink
from gputop.remote.status import FAILED, LIVE, HostEvent, HostStatus, coalesce
from gputop.remote.stream import BURST_LINES, MAX_LINE_BYTES, LineReader, SnapshotStream
from gputop.sanitize import printable
from gputop.ui.feed.inbox import Inbox
from gputop.ui.hosts.app import hosts_app
from gputop.ui.hosts.feed import RemoteFeed
from gputop.ui.hosts.section import HostSection
from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import section_lines, summary_layout, summary_line
from tests.factories import settle, wait_until
from tests.ui import scenes

MIB = 1024 * 1024
SMALL = scenes.no_driver()
GOOD = snapshot_json(SMALL)
"""A valid line (without its newline): a snapshot of a machine without a driver, about 1 KB."""

FAKE_SSH = """\
import sys, time
if "-G" in sys.argv:
    sys.exit(1)  # no ssh config to tell: the link gives all its own options
out = sys.stdout.buffer
"""


def fake_ssh(tmp_path: Path, name: str, body: str) -> tuple[str, ...]:
    """An ssh command that runs ``body`` (Python, with ``out`` the stdout bytes) instead of connecting anywhere."""
    script = tmp_path / f"ssh-{name}.py"
    script.write_text(FAKE_SSH + textwrap.dedent(body))
    return (sys.executable, str(script))


class Cost:
    """The CPU time of this process (every thread) and its resident memory above where it started, sampled every
    10 ms, while the ``with`` block runs."""

    def __enter__(self) -> Cost:
        self._proc = psutil.Process()
        self._base = self._proc.memory_info().rss
        self._peak = self._base
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self._cpu = time.process_time()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self.cpu_s = time.process_time() - self._cpu
        self._done.set()
        self._sampler.join()
        self.rss_mib = (self._peak - self._base) / MIB

    def __str__(self) -> str:
        return f"{self.cpu_s:.2f} s of CPU, {self.rss_mib:.0f} MiB more memory"

    def unbounded(self) -> str | None:
        """Why this cost can only come from work or memory that grows with the input, or None.

        Not the targets (2 s of CPU, 100 MiB), which ``benchmarks/abuse.py`` measures and reports: bounds five
        times wider, that the quadratic reader (27 s) and the unbounded hand-off (+753 MiB) broke and that a
        busy machine does not."""
        if self.cpu_s > 10.0 or self.rss_mib > 500:
            return f"{self}: grows with the input"
        return None


class Events:
    """Every event a fleet or link hands on, from its threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[HostEvent] = []

    def __call__(self, event: HostEvent) -> None:
        with self.lock:
            self.seen.append(event)

    def last(self) -> HostStatus | None:
        with self.lock:
            return self.seen[-1].status if self.seen else None

    def snapshots(self) -> list[Snapshot]:
        with self.lock:
            return [e.snapshot for e in self.seen if e.snapshot is not None]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ended(events: Events) -> list[HostStatus]:
    """The statuses of the connections that ended (those with a retry time), oldest first."""
    with events.lock:
        return [e.status for e in events.seen if e.status.retry_at is not None]


def at(t: float) -> bytes:
    return snapshot_json(replace(SMALL, time=t))


# -- the line reader ---------------------------------------------------------------------------------------------

pieces = st.lists(
    st.sampled_from([b"\n", b"x", b"ab", b"\r\n", b"\x00", b"\xff", b"\n\n"]) | st.binary(max_size=90), max_size=60
).map(b"".join)


@given(data=pieces, cuts=st.lists(st.integers(0, 4000), max_size=30), limit=st.integers(1, 70))
@settings(max_examples=400, deadline=None)
def test_any_bytes_in_any_chunks_come_out_as_their_lines_or_counted_too_long(
    data: bytes, cuts: list[int], limit: int
) -> None:
    reader = LineReader(limit)
    lines = []
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for start, end in itertools.pairwise(bounds):
        lines += reader.feed(data[start:end])
        assert reader.buffered <= limit  # never more than one line's worth held, however the bytes come
    assert reader.feed(b"") == []
    *complete, last = data.split(b"\n")
    assert lines == [line for line in complete if len(line) <= limit]
    assert reader.too_long == sum(len(line) > limit for line in complete) + (len(last) > limit)


def test_an_80_mib_line_is_searched_once_held_to_the_limit_and_the_next_line_read() -> None:
    reader = LineReader()
    chunk = b"x" * 65536
    with Cost() as cost:
        for _ in range(80 * 16):
            assert reader.feed(chunk) == []
            assert reader.buffered <= MAX_LINE_BYTES
        assert reader.feed(b"xx\n" + GOOD + b"\n") == [GOOD]
    assert reader.too_long == 1
    assert reader.buffered == 0
    print(f"80 MiB without a newline, in 64 KiB chunks: {cost}")
    assert cost.cpu_s < 1.0, cost


# -- the stream: lines to snapshots, at a bounded rate -----------------------------------------------------------

VALID = [at(1.0), at(2.0), snapshot_json(scenes.training_node())]
LIMIT = max(map(len, VALID)) + 10
stream_pieces = st.lists(
    st.sampled_from(VALID)
    | st.binary(max_size=40)
    | st.sampled_from([b"", b"  ", b"[]", b'{"time": "soon"}', b"[" * 5000, b"y" * (LIMIT + 1)]),
    max_size=25,
)


@given(lines=stream_pieces, cuts=st.lists(st.integers(0, 60000), max_size=20))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_stream_yields_the_snapshots_of_its_good_lines_and_counts_every_other_line(
    lines: list[bytes], cuts: list[int]
) -> None:
    clock = Clock()
    stream = SnapshotStream(1.0, clock, max_line_bytes=LIMIT)
    data = b"\n".join(lines) + b"\n"
    out: list[Snapshot] = []
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for start, end in itertools.pairwise(bounds):
        out += stream.feed(data[start:end])
        clock.now += 60  # the budget is full again for the next chunk
    out += stream.due()
    assert stream.wait_s() is None  # nothing left held back
    counted = [line for line in data.split(b"\n")[:-1] if line.strip()]
    good = [snapshot_from_json(line) for line in counted if line in VALID]
    too_long = sum(len(line) > LIMIT for line in counted)
    assert len(out) + stream.bad + stream.dropped == len(counted)  # each line is a snapshot or counted, once
    assert stream.too_long == too_long and stream.bad >= too_long
    if stream.dropped == 0:
        assert out == good
        assert stream.bad == len(counted) - len(good)
        others = [line for line in counted if line not in VALID and len(line) <= LIMIT]
        first = printable(others[0][:80].decode(errors="replace")) if others else None
        assert stream.first_bad == first  # what the host sent, said as text
    else:
        assert all(snap in good for snap in out)


def test_a_fast_stream_is_read_at_two_snapshots_per_interval_the_newest_first() -> None:
    clock = Clock()
    stream = SnapshotStream(1.0, clock)
    got = stream.feed(b"".join(at(n) + b"\n" for n in range(100)))
    assert [s.time for s in got] == list(range(100 - BURST_LINES, 100))  # a burst: the newest ten
    assert stream.dropped == 100 - BURST_LINES
    # Out of budget: the newest line is held back (an older held one is dropped), and read half an interval on.
    assert stream.feed(at(100) + b"\n" + at(101) + b"\n") == []
    assert stream.dropped == 100 - BURST_LINES + 1
    assert stream.wait_s() == pytest.approx(0.5)
    assert stream.due() == []
    clock.now += 0.5
    assert [s.time for s in stream.due()] == [101]
    assert stream.wait_s() is None
    # When the connection ends, a line still held back is read all the same: the host's last word is shown.
    assert stream.feed(at(102) + b"\n") == []
    assert [s.time for s in stream.finish()] == [102]
    assert stream.finish() == []


def test_the_summary_and_section_say_what_was_skipped_without_losing_their_own_columns() -> None:
    now = scenes.T0 + 1
    live = HostStatus("gpu-node-07", LIVE, last_snapshot_at=scenes.T0, stale_after_s=5, bad_lines=3)
    busy, bare = scenes.training_node(), scenes.no_driver()
    for width in (80, 120, 160):
        layout = summary_layout(["gpu-node-07"], width)
        line = summary_line("gpu-node-07", live, busy, now, layout, width, Palette()).plain
        without = summary_line("gpu-node-07", replace(live, bad_lines=0), busy, now, layout, width, Palette()).plain
        assert line == without or line.startswith(without + "  3 bad lines skipped")
        assert len(line) <= width
    wide = summary_line("gpu-node-07", live, bare, now, summary_layout(["gpu-node-07"], 120), 120, Palette()).plain
    assert wide.endswith("1s  3 bad lines skipped")
    down = replace(live, state=FAILED, reason="gone", retry_at=now + 4, failures=1, dropped_lines=1)
    text = [line.plain for line in section_lines(down, None, None, now, 120, Palette())]
    assert text[-1] == "3 bad lines skipped · 1 line dropped (sent too fast)"
    text = [line.plain for line in section_lines(live, busy, None, now, 120, Palette())]
    assert text[1] == "3 bad lines skipped"


# -- the hand-off to the UI thread -------------------------------------------------------------------------------


def test_the_hand_off_keeps_the_newest_status_and_snapshot_per_host() -> None:
    wakes = []
    inbox: Inbox[HostEvent] = Inbox(lambda: wakes.append(1), key=lambda e: e.name, merge=coalesce)

    def flood(name: str) -> None:
        for n in range(18000):
            inbox.put(HostEvent(HostStatus(name, LIVE, last_snapshot_at=n), replace(SMALL, time=n)))

    threads = [threading.Thread(target=flood, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    inbox.put(HostEvent(HostStatus("a", FAILED, "gone")))  # a status alone keeps the snapshot before it
    events = {e.name: e for e in inbox.drain()}
    assert len(wakes) == 1
    assert events["a"].status.state == FAILED and events["a"].snapshot.time == 17999
    assert events["b"].status.last_snapshot_at == 17999 and events["b"].snapshot.time == 17999
    assert list(inbox.drain()) == []


class BurstingHosts:
    """The fleet's interface over hosts whose events come from another thread all at once, as many hosts (or a
    dashboard too busy to keep up) would bring them."""

    def __init__(self, names: list[str], events: int) -> None:
        self.specs = tuple(HostSpec(name) for name in names)
        self.events = events
        self.subscribers: list[Callable[[HostEvent], None]] = []
        self.thread = threading.Thread(target=self._burst, daemon=True)

    def clock(self) -> float:
        return scenes.T0

    def subscribe(self, callback: Callable[[HostEvent], None]) -> None:
        self.subscribers.append(callback)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.thread.join()

    def set_interval(self, interval_s: float) -> None:
        raise AssertionError("the multi-host view's interval is fixed")

    def _burst(self) -> None:
        snap = scenes.training_node()
        for n in range(self.events):
            spec = self.specs[n % len(self.specs)]
            event = HostEvent(HostStatus(spec.name, LIVE, last_snapshot_at=scenes.T0), replace(snap, time=n))
            for callback in self.subscribers:
                callback(event)


async def test_the_dashboard_takes_the_newest_event_of_each_host_not_every_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = []
    take = RemoteFeed.take_event
    monkeypatch.setattr(RemoteFeed, "take_event", lambda feed, event: (taken.append(event), take(feed, event)))
    hosts = BurstingHosts(["a", "b", "c"], 18000)
    app = hosts_app(hosts, user="alice")  # type: ignore[arg-type]
    with Cost() as cost:
        async with app.run_test(size=(160, 48)) as pilot:
            hosts.thread.join()
            await pilot.pause()
            latest = [feed.latest.time if feed.latest else None for feed in app.feed.feeds.values()]
    print(f"18,000 events from 3 hosts at once: {cost}; {len(taken)} taken by the UI thread")
    assert latest == [17997, 17998, 17999]
    assert len(taken) < 1000
    assert cost.unbounded() is None, cost.unbounded()


# -- through real processes --------------------------------------------------------------------------------------


def test_an_80_mib_line_without_a_newline_is_skipped_and_the_connection_goes_on(tmp_path: Path) -> None:
    (tmp_path / "good").write_bytes(GOOD + b"\n")
    ssh = fake_ssh(
        tmp_path,
        "endless",
        f"""
        block = b"x" * MIB
        for _ in range(80):
            out.write(block)
        out.write(b"\\n" + open({str(tmp_path / "good")!r}, "rb").read())
        out.flush()
        time.sleep(60)
        """.replace("MIB", str(MIB)),
    )
    events = Events()
    fleet = Fleet([HostSpec("endless")], 0.5, ssh)
    fleet.subscribe(events)
    with Cost() as cost:
        fleet.start()
        try:
            wait_until(events.snapshots)
        finally:
            fleet.stop()
    status = events.last()
    assert status is not None and status.state == LIVE
    assert events.snapshots() == [SMALL]
    assert status.bad_lines == 1
    print(f"an 80 MiB line, then a snapshot: {cost}")
    assert cost.unbounded() is None, cost.unbounded()


async def test_a_flood_of_18000_snapshots_in_5_s_costs_the_dashboard_little(tmp_path: Path) -> None:
    marker = 1234567.25
    line = snapshot_json(replace(scenes.training_node(), time=marker))
    assert line.count(str(marker).encode()) == 1
    (tmp_path / "template").write_bytes(line.replace(str(marker).encode(), b"@TIME@") + b"\n")
    last = scenes.T0 + 100000
    ssh = fake_ssh(
        tmp_path,
        "flood",
        f"""
        head, tail = open({str(tmp_path / "template")!r}, "rb").read().split(b"@TIME@")
        start = time.monotonic()
        for batch in range(50):  # 360 snapshots every 0.1 s
            numbers = range(batch * 360, batch * 360 + 360)
            out.write(b"".join(head + str({scenes.T0} + n).encode() + tail for n in numbers))
            out.flush()
            time.sleep(max(0.0, start + (batch + 1) * 0.1 - time.monotonic()))
        out.write(head + str({last}).encode() + tail)
        out.flush()
        time.sleep(60)
        """,
    )
    fleet = Fleet([HostSpec("flood")], 0.5, ssh)
    handed = Events()
    fleet.subscribe(handed)
    app = hosts_app(fleet, interval_s=0.5, user="alice")
    feed = app.feed.feeds["flood"]
    with Cost() as cost:
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 60
            while (feed.latest is None or feed.latest.time != last) and time.monotonic() < deadline:
                await pilot.pause(0.1)
            await pilot.pause()
            assert feed.latest is not None and feed.latest.time == last, "the newest snapshot never came"
            assert feed.status.state == LIVE
            section = app.screen.query_one(HostSection)
            text = [line.plain for line in section.text_lines(section.content_size.width)]
            assert any("lines dropped" in line for line in text), text
    status = feed.status
    snapshots = len(handed.snapshots())
    print(f"18,000 snapshots in 5 s: {cost}; {snapshots} decoded and handed on, {status.dropped_lines} dropped")
    assert snapshots + status.dropped_lines == 18001
    assert snapshots < 100
    assert cost.unbounded() is None, cost.unbounded()


def test_lines_of_the_wrong_kind_are_counted_and_skipped_and_the_host_stays_live(tmp_path: Path) -> None:
    bad = [
        b"[]",
        b'{"time": "soon"}',
        b"\xff\xfe not even text",
        b"[" * 100000,  # deeper than any decoder's stack
        GOOD[: len(GOOD) // 2],
    ]
    (tmp_path / "lines").write_bytes(b"\n".join([GOOD, *bad, at(SMALL.time + 1)]) + b"\n")
    ssh = fake_ssh(
        tmp_path,
        "bad",
        f"""
        out.write(open({str(tmp_path / "lines")!r}, "rb").read())
        out.flush()
        time.sleep(60)
        """,
    )
    events = Events()
    fleet = Fleet([HostSpec("bad")], 0.5, ssh)
    fleet.subscribe(events)
    fleet.start()
    try:
        wait_until(lambda: len(events.snapshots()) == 2)
        # The status that counts the bad lines comes with or after the snapshot that follows them.
        wait_until(lambda: (events.last() or HostStatus("")).bad_lines >= len(bad), "the bad lines counted")
    finally:
        fleet.stop()
    status = events.last()
    assert status is not None and status.state == LIVE and status.failures == 0
    assert status.bad_lines == len(bad)
    assert [s.time for s in events.snapshots()] == [SMALL.time, SMALL.time + 1]


async def test_the_section_of_a_host_sending_bad_lines_says_how_many(tmp_path: Path) -> None:
    (tmp_path / "lines").write_bytes(b"\n".join([GOOD, b"[]", b"{}", b"[" * 100000, at(SMALL.time + 1)]) + b"\n")
    ssh = fake_ssh(
        tmp_path,
        "bad",
        f"""
        out.write(open({str(tmp_path / "lines")!r}, "rb").read())
        out.flush()
        time.sleep(60)
        """,
    )
    app = hosts_app(Fleet([HostSpec("bad")], 0.5, ssh), interval_s=0.5, user="alice")
    feed = app.feed.feeds["bad"]
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: feed.status.bad_lines >= 3, "the bad lines counted")
        await pilot.pause()
        section = app.screen.query_one(HostSection)
        text = [line.plain for line in section.text_lines(section.content_size.width)]
        assert any("3 bad lines skipped" in line for line in text), text


def test_escape_sequences_from_a_remote_host_reach_the_screen_as_text(tmp_path: Path) -> None:
    hostile = "gpu\x1b]0;owned\x07\x1b[2J"
    snap = replace(
        SMALL,
        host=replace(SMALL.host, hostname=hostile),
        processes=tuple(
            replace(p, host=replace(p.host, command="rm -rf /\x9b31m")) if p.host else p
            for p in scenes.training_node().processes[:1]
        ),
    )
    (tmp_path / "line").write_bytes(snapshot_json(snap) + b"\n")
    ssh = fake_ssh(
        tmp_path,
        "escapes",
        f"""
        out.write(open({str(tmp_path / "line")!r}, "rb").read())
        out.flush()
        sys.stderr.write("fatal: \\x1b]0;owned\\x07\\x1b[31mred\\x1b[0m\\n")
        sys.exit(3)
        """,
    )
    events = Events()
    fleet = Fleet([HostSpec("escapes")], 0.5, ssh)
    fleet.subscribe(events)
    fleet.start()
    try:
        wait_until(lambda: ended(events))
    finally:
        fleet.stop()
    [got] = events.snapshots()[:1]
    assert got.host.hostname == "gpu\\x1b]0;owned\\x07\\x1b[2J"
    assert got.processes[0].host is not None and got.processes[0].host.command == "rm -rf /\\x9b31m"
    reason = ended(events)[0].reason
    assert "\\x1b]0;owned\\x07\\x1b[31mred\\x1b[0m" in reason
    assert reason.isprintable()


def test_a_host_that_sends_no_snapshot_fails_after_the_first_snapshot_timeout(tmp_path: Path) -> None:
    ssh = fake_ssh(
        tmp_path,
        "banner",
        """
        out.write(b"Welcome to the cluster! \\x1b[5mmaintenance tonight\\x1b[0m\\n")
        out.flush()
        time.sleep(60)
        """,
    )
    events = Events()
    link = SshLink(HostSpec("banner"), 0.2, events, ssh, first_snapshot_s=1.0)
    started = time.monotonic()
    link.start()
    try:
        wait_until(lambda: (events.last() or HostStatus("")).state == FAILED)
        took = time.monotonic() - started
    finally:
        link.stop()
        link.join()
    status = events.last()
    assert status is not None and status.retry_at is not None
    assert status.reason == (
        'gputop on banner sent no snapshot in 1 s, only other lines: "Welcome to the cluster! '
        '\\x1b[5mmaintenance tonight\\x1b[0m"'
    )
    assert status.bad_lines == 1
    assert 1.0 <= took < 15.0  # well before the default of 30 s, on a busy machine too
