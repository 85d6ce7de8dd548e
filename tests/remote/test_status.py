"""The connection state machine, its backoff and why a connection ended, on an injected clock."""

from __future__ import annotations

import pytest

from gputop.remote.hostspec import HostSpec
from gputop.remote.link import ssh_argv
from gputop.remote.status import (
    AUTH_FAILED,
    CONNECTING,
    DROPPED,
    FAILED,
    LIVE,
    NO_GPUTOP,
    STALE,
    TOO_OLD,
    UNREACHABLE,
    Backoff,
    HostTracker,
    Outcome,
    classify,
    stale_after,
)

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = Backoff(first_s=1.0, max_s=30.0)
    assert [backoff.next() for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    backoff.reset()
    assert backoff.next() == 1.0


def test_a_host_goes_live_drops_backs_off_and_recovers() -> None:
    clock = Clock()
    tracker = HostTracker("gpu-node-01", stale_after_s=5.0, clock=clock)
    assert tracker.connecting().state == CONNECTING
    clock.now += 0.8
    live = tracker.received()
    assert (live.state, live.last_snapshot_at, live.since) == (LIVE, 1000.8, 1000.8)

    clock.now += 10
    dropped = tracker.ended(Outcome(DROPPED, "connection to gpu-node-01 lost"))
    assert (dropped.state, dropped.reason, dropped.since, dropped.retry_at) == (
        DROPPED,
        "connection to gpu-node-01 lost",
        1010.8,
        1011.8,
    )
    assert tracker.retry_in() == pytest.approx(1.0)

    # Refused three times: the waits double, the host stays down since it dropped, and says why meanwhile.
    delays = []
    for _ in range(3):
        clock.now = tracker.status.retry_at
        again = tracker.connecting()
        assert (again.state, again.reason, again.since) == (CONNECTING, tracker.status.reason, 1010.8)
        assert again.down()
        clock.now += 0.1
        status = tracker.ended(Outcome(UNREACHABLE, "connection refused"))
        delays.append(round(status.retry_at - clock.now, 6))
        assert status.since == 1010.8
    assert delays == [2.0, 4.0, 8.0]
    assert tracker.status.failures == 4

    # A connection that delivers resets the backoff: the next drop waits 1 s again.
    clock.now = tracker.status.retry_at
    tracker.connecting()
    back = tracker.received()
    assert (back.state, back.failures, back.reason, back.since) == (LIVE, 0, "", clock.now)
    clock.now += 3
    assert tracker.ended(Outcome(DROPPED, "lost")).retry_at == clock.now + 1.0


def test_a_live_host_that_sends_nothing_turns_stale() -> None:
    clock = Clock()
    tracker = HostTracker("h", stale_after_s=stale_after(1.0), clock=clock)
    tracker.connecting()
    status = tracker.received()
    assert stale_after(1.0) == 5.0 and stale_after(0.1) == 3.0
    assert status.shown_state(clock.now + 5.0) == LIVE
    assert status.shown_state(clock.now + 5.1) == STALE
    clock.now += 6
    assert tracker.received().shown_state(clock.now) == LIVE


HOST, COMMAND = "gpu-node-01", "gputop"


@pytest.mark.parametrize(
    ("returncode", "stderr", "delivered", "state", "reason"),
    [
        (
            255,
            "ssh: connect to host gpu-node-01 port 22: Connection refused\n",
            False,
            UNREACHABLE,
            "connection refused (ssh: connect to host gpu-node-01 port 22: Connection refused)",
        ),
        (
            255,
            "ssh: connect to host 10.0.0.9 port 22: Connection timed out\n",
            False,
            UNREACHABLE,
            "connection timed out (ssh: connect to host 10.0.0.9 port 22: Connection timed out)",
        ),
        (
            255,
            "ssh: Could not resolve hostname gpu-node-01: Name or service not known\n",
            False,
            UNREACHABLE,
            "unknown host name (ssh: Could not resolve hostname gpu-node-01: Name or service not known)",
        ),
        (
            255,
            "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\n"
            "root@127.0.0.1: Permission denied (publickey).\n",
            False,
            AUTH_FAILED,
            "ssh login refused (root@127.0.0.1: Permission denied (publickey).): gputop never asks for a password; "
            "use a key or an ssh agent",
        ),
        (
            255,
            "Host key verification failed.\n",
            False,
            AUTH_FAILED,
            "host key verification failed: check and accept gpu-node-01's key with ssh first",
        ),
        (
            255,
            "Timeout, server gpu-node-01 not responding.\n",
            True,
            DROPPED,
            "no answer from gpu-node-01 (Timeout, server gpu-node-01 not responding.)",
        ),
        (
            255,
            "Connection to 127.0.0.1 closed by remote host.\n",
            True,
            DROPPED,
            "connection to gpu-node-01 lost (Connection to 127.0.0.1 closed by remote host.)",
        ),
        (255, "", True, DROPPED, "connection to gpu-node-01 lost"),
        (
            255,
            "kex_exchange_identification: read: reset\n",
            False,
            FAILED,
            "ssh failed (kex_exchange_identification: read: reset)",
        ),
        (
            127,
            "bash: line 1: gputop: command not found\n",
            False,
            NO_GPUTOP,
            "gputop is not installed on gpu-node-01 (gputop: command not found)",
        ),
        (
            126,
            "bash: line 1: /opt/gputop: Permission denied\n",
            False,
            NO_GPUTOP,
            "gputop on gpu-node-01 cannot be run: bash: line 1: /opt/gputop: Permission denied",
        ),
        (
            2,
            "gputop: error: unrecognized arguments: --full (see gputop --help)\n",
            False,
            TOO_OLD,
            "gputop on gpu-node-01 is too old for the multi-host view (no 'stream --full'): upgrade it",
        ),
        (2, "gputop: error: argument COMMAND: invalid choice: 'stream'\n", False, TOO_OLD, None),
        (0, "", True, DROPPED, "gputop on gpu-node-01 stopped"),
        (
            1,
            "Traceback...\nRuntimeError: boom\n",
            True,
            FAILED,
            "gputop on gpu-node-01 exited with status 1: RuntimeError: boom",
        ),
        (-15, "", True, DROPPED, "ssh ended by signal 15"),
    ],
)
def test_why_a_connection_ended(returncode: int, stderr: str, delivered: bool, state: str, reason: str | None) -> None:
    outcome = classify(returncode, stderr, HOST, COMMAND, delivered)
    assert outcome.state == state
    if reason is not None:
        assert outcome.reason == reason


def test_the_ssh_command_puts_the_users_options_first_and_never_prompts() -> None:
    argv = ssh_argv(HostSpec("alice@gpu-node-02", "~/venv/bin/gputop"), 0.5, ("ssh", "-F", "cfg"), ["Port=2222"])
    assert argv[:5] == ["ssh", "-F", "cfg", "-o", "Port=2222"]
    assert "BatchMode=yes" in argv and "ServerAliveInterval=5" in argv and "ConnectTimeout=10" in argv
    assert argv[-3:] == ["--", "alice@gpu-node-02", "~/venv/bin/gputop stream --full -d 0.5"]
