"""The signal dialog against real processes: it names its target, confirming kills, cancelling spares."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace

import psutil
import pytest

from gputop.collect.host import HostCollector
from gputop.collect.sampler import SnapshotMaker
from gputop.model import COMPUTE, GpuProcess, HostProcess, Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.screens.dashboard import DashboardScreen
from gputop.ui.screens.detail import ProcessDetailScreen
from gputop.ui.screens.signal_dialog import SignalDialog
from gputop.ui.signals import ProcessHandle
from gputop.ui.widgets.process_table import ProcessTable
from tests.factories import DEADLINE_S
from tests.machines import training_box
from tests.ui import scenes

MakeApp = Callable[..., GputopApp]
Spawn = Callable[..., subprocess.Popen]


def with_victim(pid: int) -> Snapshot:
    """The training node plus one real process of ours on GPU 1."""
    snap = scenes.training_node()
    command = "python -c import time; time.sleep(300)"
    started = psutil.Process(pid).create_time()
    victim = GpuProcess(
        pid,
        1,
        COMPUTE,
        1 << 30,
        0.0,
        0.0,
        host=HostProcess(
            pid,
            visible=True,
            user="alice",
            name="python",
            command=command,
            cpu_percent=0.0,
            rss_bytes=1 << 20,
            start_time=started,
        ),
    )
    host = HostProcess(pid, os.getpid(), True, "alice", "python", command, 0.0, 1 << 20, started)
    return replace(snap, processes=(*snap.processes, victim), host_processes=(*snap.host_processes, host))


async def select(pilot, pid: int) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash", *str(pid), "enter")
    await pilot.pause()
    assert pilot.app.screen.query_one(ProcessTable).selected.pid == pid


def exited(proc: subprocess.Popen, timeout_s: float = DEADLINE_S) -> bool:
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


async def test_the_dialog_names_pid_user_and_command(make_app: MakeApp, spawn: Spawn) -> None:
    proc = spawn()
    app = make_app([with_victim(proc.pid)])
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, proc.pid)
        await pilot.press("k")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, SignalDialog)
        target = str(dialog.query_one("#target").content)
        assert str(proc.pid) in target
        assert "alice" in target
        assert "time.sleep(300)" in target


async def test_confirming_sigterm_ends_the_process(make_app: MakeApp, spawn: Spawn) -> None:
    proc = spawn()
    app = make_app([with_victim(proc.pid)])
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, proc.pid)
        await pilot.press("k")
        await pilot.pause()
        await pilot.click("#SIGTERM")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
    assert exited(proc)
    assert proc.returncode == -signal.SIGTERM


async def test_capital_k_in_the_dialog_sends_sigkill(make_app: MakeApp, spawn: Spawn) -> None:
    proc = spawn()
    app = make_app([with_victim(proc.pid)])
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, proc.pid)
        await pilot.press("k", "K")
        await pilot.pause()
    assert exited(proc)
    assert proc.returncode == -signal.SIGKILL


async def test_cancelling_leaves_the_process_running(make_app: MakeApp, spawn: Spawn) -> None:
    proc = spawn()
    app = make_app([with_victim(proc.pid)])
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, proc.pid)
        await pilot.press("k")
        await pilot.pause()
        await pilot.press("enter")  # Cancel has the focus: Enter alone sends nothing
        await pilot.pause()
        await pilot.press("k", "escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
    assert not exited(proc, timeout_s=0.3)


async def test_readonly_offers_no_signal_at_all(make_app: MakeApp, spawn: Spawn) -> None:
    proc = spawn()
    app = make_app([with_victim(proc.pid)], readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, proc.pid)
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        signal_keys = [b for b in app.screen.active_bindings.values() if b.binding.action == "signal"]
        assert not any(b.enabled for b in signal_keys)
        assert "k" not in {keys for keys, _ in app.key_help()}
        await pilot.press("enter", "k")
        await pilot.pause()
        assert not isinstance(app.screen, SignalDialog)
    assert not exited(proc, timeout_s=0.3)


async def test_a_permission_error_is_shown_not_raised(
    make_app: MakeApp, spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    proc = spawn()
    app = make_app([with_victim(proc.pid)])
    shown: list[str] = []
    with monkeypatch.context() as patch:  # undone before the fixture kills the process
        patch.setattr(signal, "pidfd_send_signal", refuse, raising=False)
        patch.setattr(os, "kill", refuse)
        patch.setattr(app, "notify", lambda message, **kw: shown.append(message))
        async with app.run_test(size=(120, 40)) as pilot:
            await select(pilot, proc.pid)
            await pilot.press("k", "t")
            await pilot.pause()
            assert isinstance(app.screen, DashboardScreen)
    assert shown and "no permission" in shown[0]
    assert not exited(proc, timeout_s=0.3)


def test_a_process_that_is_gone_is_reported(spawn: Spawn) -> None:
    proc = spawn()
    handle = ProcessHandle(proc.pid, psutil.Process(proc.pid).create_time())
    proc.kill()
    proc.wait()
    assert "already exited" in (handle.send(signal.SIGTERM) or "")
    handle.close()


def seen_from_a_pid_namespace_of_its_own() -> Snapshot:
    """A real snapshot as gputop takes it in a container without --pid=host, where NVML reports host PIDs."""
    maker = SnapshotMaker(host=HostCollector(nested_pid_namespace=True))
    try:
        return maker.one_shot()
    finally:
        maker.close()


@dataclass
class HostPidScene:
    """A dashboard over a GPU process whose host PID names ``local``, an unrelated process of this namespace."""

    app: GputopApp
    local: subprocess.Popen
    notices: list[str]


@pytest.fixture
def host_pid_scene(
    make_app: MakeApp, spawn: Spawn, fake_driver: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> HostPidScene:
    local = spawn()
    fake_driver(training_box(1, [local.pid]))
    app = make_app([seen_from_a_pid_namespace_of_its_own()])
    notices: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: notices.append(message))
    return HostPidScene(app, local, notices)


async def test_a_host_pid_from_outside_the_pid_namespace_is_never_offered_a_signal(
    host_pid_scene: HostPidScene,
) -> None:
    scene = host_pid_scene
    async with scene.app.run_test(size=(120, 40)) as pilot:
        await select(pilot, scene.local.pid)
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(scene.app.screen, DashboardScreen)
        await pilot.press("K", "t", "i")
        await pilot.pause()
    assert scene.notices and "host PID from outside this PID namespace" in scene.notices[0]
    assert not exited(scene.local, timeout_s=0.3)


async def test_nor_from_its_detail_screen(host_pid_scene: HostPidScene) -> None:
    scene = host_pid_scene
    async with scene.app.run_test(size=(120, 40)) as pilot:
        await select(pilot, scene.local.pid)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(scene.app.screen, ProcessDetailScreen)
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(scene.app.screen, ProcessDetailScreen)
        await pilot.press("K", "t", "i")
        await pilot.pause()
    assert scene.notices and "host PID from outside this PID namespace" in scene.notices[0]
    assert not exited(scene.local, timeout_s=0.3)
