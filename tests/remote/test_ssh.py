"""The connections over real ssh: real sshd servers on loopback ports, the real ``gputop stream --full`` behind
them over the fake driver, and hosts that fail in each of the ways the view tells apart."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.remote.fleet import Fleet
from gputop.remote.hostspec import HostSpec
from gputop.remote.status import AUTH_FAILED, LIVE, NO_GPUTOP, TOO_OLD, UNREACHABLE, HostEvent
from tests.factories import wait_until
from tests.fakenvml.state import FakeState
from tests.machines import h100
from tests.remote.conftest import GPUTOP, SshLab

OLD_GPUTOP = """#!/bin/sh
echo "gputop: error: unrecognized arguments: --full (see gputop --help)" >&2
exit 2
"""


class Events:
    """Every event the fleet hands on, from its threads, with the time each arrived."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[float, HostEvent]] = []

    def __call__(self, event: HostEvent) -> None:
        with self.lock:
            self.seen.append((time.monotonic(), event))

    def of(self, name: str) -> list[tuple[float, HostEvent]]:
        with self.lock:
            return [(at, e) for at, e in self.seen if e.name == name]

    def state(self, name: str) -> str | None:
        mine = self.of(name)
        return mine[-1][1].status.state if mine else None

    def snapshots(self, name: str) -> list[tuple[float, HostEvent]]:
        return [(at, e) for at, e in self.of(name) if e.snapshot is not None]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and then says nothing, like a host that hangs."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_each_host_in_its_own_state_and_none_holds_up_another(
    ssh_lab: SshLab, tmp_path: Path, silent_port: int
) -> None:
    good = ssh_lab.add("good", FakeState(gpus=[h100(0, util_gpu=87)]))
    ssh_lab.add("bare")  # an sshd, but no gputop where the hosts file says
    ssh_lab.route("bare-old", ssh_lab.hosts["bare"].port)  # the same sshd under another name
    ssh_lab.route("refused")
    ssh_lab.route("silent", silent_port)
    old = tmp_path / "old-gputop"
    old.write_text(OLD_GPUTOP)
    old.chmod(0o755)
    specs = [
        HostSpec("silent", str(GPUTOP)),
        HostSpec("refused", str(GPUTOP)),
        HostSpec("bare", "/opt/nowhere/gputop"),
        HostSpec("bare-old", str(old)),
        HostSpec("good", str(GPUTOP)),
    ]
    events = Events()
    # The silent host holds its connection attempt for ConnectTimeout (10 s by default): the good host's first
    # snapshot must not wait for it.
    fleet = Fleet(specs, 0.3, ssh_lab.ssh_command, ["ConnectTimeout=5"])
    fleet.subscribe(events)
    started = time.monotonic()
    fleet.start()
    try:
        wait_until(lambda: events.snapshots("good"))
        first = events.snapshots("good")[0][0] - started
        assert events.state("silent") != UNREACHABLE, f"the good host's first snapshot waited {first:.1f} s"
        snap = events.snapshots("good")[0][1].snapshot
        assert snap is not None and snap.gpus[0].utilization_gpu_percent == 87
        assert snap.gpus[0].name == "NVIDIA H100 80GB HBM3"

        wait_until(lambda: events.state("bare") == NO_GPUTOP)
        bare = events.of("bare")[-1][1].status
        assert bare.reason == "gputop is not installed on bare (/opt/nowhere/gputop: command not found)"
        wait_until(lambda: events.state("bare-old") == TOO_OLD)
        wait_until(lambda: events.state("refused") == UNREACHABLE)
        assert events.of("refused")[-1][1].status.reason.startswith(
            "connection refused (ssh: connect to host 127.0.0.1"
        )
        wait_until(lambda: events.state("silent") == UNREACHABLE)
        assert "timed out" in events.of("silent")[-1][1].status.reason

        # Meanwhile the good host kept streaming, and shows a change on its fake GPU.
        assert events.state("good") == LIVE
        assert len(events.snapshots("good")) >= 5
        good.write(FakeState(gpus=[h100(0, util_gpu=13)]))
        wait_until(lambda: events.snapshots("good")[-1][1].snapshot.gpus[0].utilization_gpu_percent == 13)

        # The failures are retried, further apart each time: 1 s, then 2 s.
        wait_until(lambda: events.of("refused")[-1][1].status.failures >= 3)
        ended = [(at, e.status) for at, e in events.of("refused") if e.status.retry_at is not None]
        waits = [round(status.retry_at - at) for at, status in ended[:3]]
        assert waits == [1, 2, 4]
    finally:
        fleet.stop()


def test_local_is_sampled_in_process_without_ssh(fake_driver) -> None:
    fake_driver(FakeState(gpus=[h100(0, util_gpu=33)]))
    events = Events()
    fleet = Fleet([HostSpec("local")], 0.2, ssh_command=("no-such-ssh",))
    fleet.subscribe(events)
    fleet.start()
    try:
        wait_until(lambda: len(events.snapshots("local")) >= 2)
    finally:
        fleet.stop()
    snap = events.snapshots("local")[-1][1].snapshot
    assert snap is not None and snap.gpus[0].utilization_gpu_percent == 33
    assert events.state("local") == LIVE


def test_a_refused_key_and_a_changed_host_key_are_auth_failures(ssh_lab: SshLab, tmp_path: Path) -> None:
    locked = ssh_lab.add("locked", FakeState(gpus=[h100(0)]), start=False)
    config = locked.directory / "sshd_config"
    config.write_text(
        config.read_text().replace(f"AuthorizedKeysFile {ssh_lab.client_key}.pub", "AuthorizedKeysFile none")
    )
    locked.start()
    moved = ssh_lab.add("moved", FakeState(gpus=[h100(0)]))
    other_key = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    known = ssh_lab.directory / "known_hosts"
    known.write_text(f"[127.0.0.1]:{moved.port} {other_key.with_suffix('.pub').read_text()}")
    events = Events()
    fleet = Fleet([HostSpec("locked", str(GPUTOP)), HostSpec("moved", str(GPUTOP))], 0.3, ssh_lab.ssh_command)
    fleet.subscribe(events)
    fleet.start()
    try:
        wait_until(lambda: events.state("locked") == AUTH_FAILED and events.state("moved") == AUTH_FAILED)
    finally:
        fleet.stop()
    assert events.of("locked")[-1][1].status.reason.startswith("ssh login refused (")
    assert "gputop never asks for a password" in events.of("locked")[-1][1].status.reason
    assert events.of("moved")[-1][1].status.reason == (
        "host key verification failed: check and accept moved's key with ssh first"
    )
    assert not events.snapshots("locked") and not events.snapshots("moved")
