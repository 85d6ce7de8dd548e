"""Whole snapshots: NVML's processes joined with the host's view of real processes, and the sampler thread."""

from __future__ import annotations

import dataclasses
import getpass
import os
import threading
import time

import psutil
import pytest

from gputop.collect.host import HostCollector
from gputop.collect.sampler import Sampler, SnapshotMaker, with_host
from gputop.model import MEASURING, NOT_VISIBLE, PROCESS_EXITED, GpuProcess, HostProcess, Snapshot
from tests.factories import wait_until
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import GIB, h100, training_box

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TREE = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) for _ in range(2)]
print("ready", flush=True)
time.sleep(300)
"""


@pytest.fixture
def maker():
    made: list[SnapshotMaker] = []

    def make(**kwargs) -> SnapshotMaker:
        m = SnapshotMaker(**kwargs)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def test_gpu_process_rows_carry_the_real_host_columns(fake_driver, spawn, maker):
    proc = spawn()
    fake_driver(training_box(1, [proc.pid]))

    snap = maker().one_shot()

    row = snap.processes[0]
    real = psutil.Process(proc.pid)
    assert (row.pid, row.gpu_index, row.gpu_memory_bytes) == (proc.pid, 0, 6 * GIB)
    assert row.host.user == getpass.getuser()
    assert row.host.command == " ".join(real.cmdline())
    assert row.host.start_time == real.create_time()
    assert row.host.rss_bytes > 1024**2
    assert row.host.cpu_percent is not None and 0 <= row.host.cpu_percent <= 100 * os.cpu_count()
    assert row.visible
    assert row.host is snap.host_process(proc.pid)  # the same reading as the process tree's, not a copy


def test_first_sight_of_a_process_has_no_cpu_percent_yet(fake_driver, spawn, maker):
    proc = spawn()
    fake_driver(training_box(1, [proc.pid]))
    m = maker()

    first = m.snapshot()
    second = m.snapshot()

    assert first.processes[0].host.cpu_percent is None
    assert first.processes[0].host.unavailable["cpu_percent"] == MEASURING
    assert second.processes[0].host.cpu_percent is not None


def test_process_that_exits_between_the_nvml_and_host_reads_keeps_its_gpu_side(fake_driver, spawn, maker):
    proc = spawn()
    fake_driver(training_box(1, [proc.pid]))
    proc.kill()
    proc.wait()

    snap = maker().one_shot()

    row = snap.processes[0]
    assert (row.pid, row.gpu_memory_bytes) == (proc.pid, 6 * GIB)
    assert row.host.command is None and row.host.user is None
    assert row.host.unavailable["command"] == PROCESS_EXITED
    assert row.visible
    assert "command" not in row.unavailable  # the GPU row holds the GPU side's reasons only
    assert snap.notices == ()


def test_pids_hidden_by_a_pid_namespace_are_marked_with_the_remedy(fake_driver, maker):
    hidden_pid = 4_000_000
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(pid=hidden_pid, used_memory=GIB)])]))

    snap = maker(host=HostCollector(nested_pid_namespace=True)).one_shot()

    row = snap.processes[0]
    assert not row.visible
    assert row.host.unavailable["command"] == NOT_VISIBLE
    assert any("--pid=host" in notice for notice in snap.notices)


def test_in_a_pid_namespace_of_its_own_nvml_pids_are_never_joined_with_the_local_process_of_that_number(
    fake_driver, spawn, maker
):
    local = spawn(TREE)  # a real process here, with children, whose PID NVML reports for a process of the host
    wait_until(lambda: len(psutil.Process(local.pid).children()) == 2)
    fake_driver(training_box(1, [local.pid]))

    snap = maker(host=HostCollector(nested_pid_namespace=True)).one_shot()

    [row] = snap.processes
    assert not row.visible
    assert (row.host.user, row.host.command, row.host.start_time, row.host.ppid) == (None, None, None, None)
    assert row.host.unavailable["command"] == NOT_VISIBLE
    assert snap.host_process(local.pid) is row.host  # no other record of that PID, e.g. for the tree or the jobs
    children = {c.pid for c in psutil.Process(local.pid).children()}
    assert children.isdisjoint(h.pid for h in snap.host_processes)  # nor its family
    assert snap.training == ()
    assert any("--pid=host" in notice for notice in snap.notices)


def test_in_a_pid_namespace_of_its_own_the_focus_is_still_a_local_process(fake_driver, spawn, maker):
    local = spawn()
    fake_driver(training_box(1, [4_000_000]))

    snap = maker(focus_pid=local.pid, host=HostCollector(nested_pid_namespace=True)).one_shot()

    assert snap.host_process(local.pid).command == " ".join(psutil.Process(local.pid).cmdline())
    assert not snap.processes[0].visible


def test_host_processes_include_the_children_of_gpu_processes(fake_driver, spawn, maker):
    parent = spawn(TREE)
    children = wait_until(
        lambda: len(psutil.Process(parent.pid).children()) == 2 and psutil.Process(parent.pid).children()
    )
    fake_driver(training_box(1, [parent.pid]))

    snap = maker().one_shot()

    watched = {p.pid: p for p in snap.host_processes}
    for child in children:
        assert watched[child.pid].ppid == parent.pid
    assert watched[parent.pid].num_threads >= 1
    assert watched[parent.pid].ppid == os.getpid()
    assert os.getpid() in watched


def test_focus_pid_without_gpu_still_has_its_host_side(fake_driver, spawn, maker):
    proc = spawn()
    fake_driver(FakeState(gpus=[h100(0)]))

    snap = maker(focus_pid=proc.pid).one_shot()

    assert snap.focus_pid == proc.pid
    assert snap.processes == ()
    assert snap.host_process(proc.pid).command == " ".join(psutil.Process(proc.pid).cmdline())


def test_zombie_process_gives_a_partial_row(fake_driver, maker):
    zombie = psutil.Popen(["sh", "-c", "exit 0"])
    wait_until(lambda: zombie.status() == psutil.STATUS_ZOMBIE)
    try:
        fake_driver(training_box(1, [zombie.pid]))
        snap = maker().one_shot()
    finally:
        zombie.wait()

    row = snap.processes[0]
    assert row.host.status == psutil.STATUS_ZOMBIE
    assert row.gpu_memory_bytes == 6 * GIB


def test_host_info_reports_cpu_memory_and_affinity(fake_driver, maker):
    fake_driver(FakeState())

    snap = maker().one_shot()

    host = snap.host
    assert host.usable_cpu_count == len(os.sched_getaffinity(0))
    assert host.cpu_count == psutil.cpu_count()
    assert len(host.cpu_percent_per_core) == psutil.cpu_count()
    assert host.memory_total_bytes == psutil.virtual_memory().total
    assert 0 < host.memory_used_bytes < host.memory_total_bytes


def test_sampler_delivers_snapshots_from_its_own_thread(fake_driver):
    fake_driver(training_box(2, []))
    seen: list[tuple[str, int]] = []
    sampler = Sampler(interval_s=0.1)
    sampler.subscribe(lambda snap: seen.append((threading.current_thread().name, len(snap.gpus))))
    sampler.start()
    try:
        wait_until(lambda: len(seen) >= 3)
    finally:
        sampler.stop()

    assert {name for name, _ in seen} == {"gputop-sampler"}
    assert {count for _, count in seen} == {2}


def test_sampler_hands_on_a_snapshot_already_made_as_its_first(fake_driver):
    """The dashboard's plain first frame took a snapshot: the sampler shows that one, it does not read again."""
    fake_driver(training_box(1, []))
    maker = SnapshotMaker()
    first = maker.snapshot()
    made, calls = maker.snapshot, []

    def counted(force_slow: bool = False) -> Snapshot:
        calls.append(force_slow)
        return made(force_slow)

    maker.snapshot = counted
    seen: list[Snapshot] = []
    sampler = Sampler(interval_s=0.1, maker_factory=lambda: maker, first=first)
    sampler.subscribe(seen.append)
    sampler.start()
    try:
        wait_until(lambda: len(seen) >= 2)
    finally:
        sampler.stop()

    assert seen[0] is first and seen[1] is not first
    assert len(calls) == len(seen) - 1


def test_sampler_hands_on_a_snapshot_already_made_before_start_returns(fake_driver):
    """The dashboard has that snapshot for its first frame, not when the sampling thread first gets to run."""
    fake_driver(training_box(1, []))
    maker = SnapshotMaker()
    first = maker.snapshot()
    seen: list[tuple[str, Snapshot]] = []
    sampler = Sampler(interval_s=30.0, maker_factory=lambda: maker, first=first)
    sampler.subscribe(lambda snap: seen.append((threading.current_thread().name, snap)))
    sampler.start()
    try:
        assert seen == [(threading.current_thread().name, first)]
    finally:
        sampler.stop()


def test_a_failing_subscriber_does_not_stop_sampling(fake_driver):
    fake_driver(training_box(1, []))
    good: list[float] = []
    sampler = Sampler(interval_s=0.1)
    sampler.subscribe(lambda snap: 1 / 0)
    sampler.subscribe(lambda snap: good.append(snap.time))
    sampler.start()
    try:
        wait_until(lambda: len(good) >= 3)
    finally:
        sampler.stop()


def test_sampler_stops_promptly_and_takes_a_new_interval(fake_driver):
    fake_driver(training_box(1, []))
    times: list[float] = []
    sampler = Sampler(interval_s=30.0)
    sampler.subscribe(lambda snap: times.append(time.monotonic()))
    sampler.start()
    wait_until(lambda: len(times) >= 1)
    sampler.set_interval(0.1)
    wait_until(lambda: len(times) >= 3)

    started = time.monotonic()
    sampler.stop()

    assert time.monotonic() - started < 10.0  # not the 30 s interval it was waiting out
    assert not any(t.name == "gputop-sampler" for t in threading.enumerate())


def test_cpu_percent_of_a_busy_process_is_measured_between_ticks(fake_driver, spawn, maker):
    busy = spawn("while True: pass")
    fake_driver(training_box(1, [busy.pid]))
    m = maker()
    m.snapshot()
    time.sleep(0.5)

    row = m.snapshot().processes[0]

    # Some of the half second on any machine, however busy its CPUs; never more than its one core.
    assert 0 < row.host.cpu_percent <= 110


def test_with_host_copies_every_field_of_the_nvml_row():
    values = {f.name: object() for f in dataclasses.fields(GpuProcess)}
    row = GpuProcess(**values)  # type: ignore[arg-type]
    host = HostProcess(7)

    joined = with_host(row, host)

    assert joined.host is host
    assert all(getattr(joined, name) is value for name, value in values.items() if name != "host")


def test_joined_rows_are_reused_while_neither_side_changed_and_remade_when_one_did(fake_driver, spawn, maker):
    procs = [spawn(), spawn()]
    time.sleep(0.5)  # past their start-up: asleep, their /proc/PID/stat stays the same
    driver = fake_driver(training_box(2, [p.pid for p in procs]))
    m = maker(slow_interval_s=float("inf"))
    m.snapshot(force_slow=True)
    m.snapshot()
    first = m.snapshot()
    second = m.snapshot()
    # Sleeping processes: the same NVML rows and host records, so the same joined rows.
    assert [p is q for p, q in zip(first.processes, second.processes)] == [True, True]
    assert second.processes[0].host is second.host_process(procs[0].pid)

    driver.write(training_box(2, [procs[0].pid]))
    after = m.snapshot(force_slow=True)
    assert [p.pid for p in after.processes] == [procs[0].pid]
    assert after.processes[0].host is after.host_process(procs[0].pid)
    assert set(m._joined) == {(procs[0].pid, 0)}  # rows of processes gone are not kept
