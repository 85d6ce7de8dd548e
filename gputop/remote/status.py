"""The state of one host's connection: what to call it, why it ended, and when to try again.

Pure: every transition takes the time from an injected clock, so the state machine and the backoff are tested
without sleeping. The connection threads (``gputop.remote.link``) drive it; the dashboard reads ``HostStatus``.

    connecting ──snapshot──▶ live ──(no snapshot for stale_after_s)──▶ stale ──snapshot──▶ live
        ▲                     │
        └──── retry_at ◀──────┴── ended: dropped, unreachable, no gputop, old gputop, auth failed, failed
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from gputop.model import Snapshot
from gputop.sanitize import printable

HostState = Literal[
    "connecting", "live", "stale", "dropped", "unreachable", "no gputop", "old gputop", "auth failed", "failed"
]
"""A remote host's connection, moved from one to the next by ``HostTracker``."""
CONNECTING: Final = "connecting"
LIVE: Final = "live"
STALE: Final = "stale"
DROPPED: Final = "dropped"
UNREACHABLE: Final = "unreachable"
NO_GPUTOP: Final = "no gputop"
TOO_OLD: Final = "old gputop"
AUTH_FAILED: Final = "auth failed"
FAILED: Final = "failed"
DOWN_STATES: frozenset[HostState] = frozenset({DROPPED, UNREACHABLE, NO_GPUTOP, TOO_OLD, AUTH_FAILED, FAILED})

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 30.0
STALE_INTERVALS = 5
MIN_STALE_S = 3.0

SSH_FAILED = 255
"""ssh's own exit status for its failures (connecting, authenticating, a dropped link); any other is the remote
command's."""
COMMAND_NOT_FOUND = 127
COMMAND_NOT_EXECUTABLE = 126
USAGE_ERROR = 2
IGNORED_STDERR = ("Warning: Permanently added",)


def stale_after(interval_s: float) -> float:
    """How long a live host may send nothing before it is shown as stale: a few intervals, never under 3 s."""
    return max(MIN_STALE_S, STALE_INTERVALS * interval_s)


@dataclass(frozen=True)
class Outcome:
    """How a connection ended: the state it leaves the host in and why, in words for the screen."""

    state: HostState
    reason: str


def _lines(stderr: str) -> list[str]:
    """stderr's lines worth showing, each made printable: they come from another machine and end up on screen."""
    return [
        printable(line.strip())
        for line in stderr.splitlines()
        if line.strip() and not line.strip().startswith(IGNORED_STDERR)
    ]


def classify(returncode: int | None, stderr: str, host: str, command: str, delivered: bool) -> Outcome:
    """Why ``ssh HOST COMMAND stream --full`` ended, from its exit status and what it wrote on stderr.

    ``delivered``: the connection had sent at least one snapshot (so an ssh failure is a drop, not a refusal).
    """
    lines = _lines(stderr)
    last = lines[-1] if lines else ""
    text = "\n".join(lines).lower()
    if returncode == COMMAND_NOT_FOUND or (returncode != SSH_FAILED and "command not found" in text):
        return Outcome(NO_GPUTOP, f"gputop is not installed on {host} ({command}: command not found)")
    if returncode == COMMAND_NOT_EXECUTABLE:
        return Outcome(NO_GPUTOP, f"{command} on {host} cannot be run: {last or 'not executable'}")
    if returncode == USAGE_ERROR and (
        ("unrecognized arguments" in text and "--full" in text) or "invalid choice: 'stream'" in text
    ):
        return Outcome(TOO_OLD, f"gputop on {host} is too old for the multi-host view (no 'stream --full'): upgrade it")
    if returncode == SSH_FAILED:
        return _ssh_failure(text, last, host, delivered)
    if returncode == 0:
        return Outcome(DROPPED, f"gputop on {host} stopped")
    if returncode is not None and returncode < 0:
        return Outcome(DROPPED, f"ssh ended by signal {-returncode}")
    status = "an unknown status" if returncode is None else f"status {returncode}"
    return Outcome(FAILED, f"{command} on {host} exited with {status}" + (f": {last}" if last else ""))


def _ssh_failure(text: str, last: str, host: str, delivered: bool) -> Outcome:
    said = f" ({last})" if last else ""
    if "permission denied" in text:
        return Outcome(
            AUTH_FAILED, f"ssh login refused{said}: gputop never asks for a password; use a key or an ssh agent"
        )
    if "host key verification failed" in text or "remote host identification has changed" in text:
        return Outcome(AUTH_FAILED, f"host key verification failed: check and accept {host}'s key with ssh first")
    if "not responding" in text:  # ServerAliveInterval × ServerAliveCountMax without an answer
        return Outcome(DROPPED, f"no answer from {host}{said}")
    for words, reason in (
        ("connection refused", "connection refused"),
        ("timed out", "connection timed out"),
        ("could not resolve hostname", "unknown host name"),
        ("name or service not known", "unknown host name"),
        ("no route to host", "no route to host"),
        ("network is unreachable", "network is unreachable"),
    ):
        if words in text:
            return Outcome(UNREACHABLE, reason + said)
    if delivered or "closed by remote host" in text or "connection reset" in text or "broken pipe" in text:
        return Outcome(DROPPED, f"connection to {host} lost{said}")
    return Outcome(FAILED, f"ssh failed{said or ' with exit status 255'}")


class Backoff:
    """Delays between retries: ``first_s``, doubling up to ``max_s``; back to ``first_s`` after ``reset``."""

    def __init__(self, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S, factor: float = 2.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.factor = factor
        self._next = first_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self.max_s, delay * self.factor)
        return delay

    def reset(self) -> None:
        self._next = self.first_s


@dataclass(frozen=True)
class HostStatus:
    """One host's connection at one moment; times are on the clock of the ``HostTracker`` that made it."""

    name: str
    state: HostState = CONNECTING
    reason: str = ""
    """Why the host is down; while connecting again, why the last attempt failed."""
    since: float = 0.0
    """When the host entered ``state`` (a reconnection keeps the down time running)."""
    last_snapshot_at: float | None = None
    retry_at: float | None = None
    failures: int = 0
    """Attempts in a row that ended without a snapshot, or with the connection dropping."""
    stale_after_s: float = MIN_STALE_S
    bad_lines: int = 0
    """Lines from the host that were not snapshots (or too long to be one), skipped, over every connection."""
    dropped_lines: int = 0
    """Lines never read because newer ones came faster than the interval asks for."""

    def shown_state(self, now: float) -> HostState:
        """``state``, or ``stale`` for a live host that has sent nothing for ``stale_after_s``."""
        if (
            self.state == LIVE
            and self.last_snapshot_at is not None
            and now - self.last_snapshot_at > self.stale_after_s
        ):
            return STALE
        return self.state

    def down(self) -> bool:
        return self.state in DOWN_STATES or (self.state == CONNECTING and self.failures > 0)


@dataclass(frozen=True)
class HostEvent:
    """What a connection hands the dashboard: the host's new status, and a snapshot when one arrived."""

    status: HostStatus
    snapshot: Snapshot | None = None

    @property
    def name(self) -> str:
        return self.status.name


def coalesce(older: HostEvent, newer: HostEvent) -> HostEvent:
    """One event that stands for both, for a hand-off that keeps one per host: the newer status and the newest
    snapshot (a status alone, such as the connection ending, does not lose the snapshot before it)."""
    return newer if newer.snapshot is not None or older.snapshot is None else HostEvent(newer.status, older.snapshot)


class HostTracker:
    """The state machine of one host. Not thread-safe: one connection thread drives it."""

    def __init__(
        self,
        name: str,
        stale_after_s: float,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.clock = clock
        self.backoff = backoff or Backoff()
        self.status = HostStatus(name, since=clock(), stale_after_s=stale_after_s)
        self._delivered = False

    def connecting(self) -> HostStatus:
        """A connection attempt starts. A host that was down stays down (``since``) until a snapshot arrives."""
        self._delivered = False
        was_down = self.status.down()
        since = self.status.since if was_down else self.clock()
        self.status = replace(self.status, state=CONNECTING, since=since, retry_at=None)
        return self.status

    def received(self) -> HostStatus:
        """A snapshot arrived: the host is live, and the first one of a connection resets the backoff."""
        now = self.clock()
        if not self._delivered:
            self._delivered = True
            self.backoff.reset()
        since = self.status.since if self.status.state == LIVE else now
        self.status = replace(self.status, state=LIVE, reason="", since=since, last_snapshot_at=now, failures=0)
        return self.status

    def counted(self, bad: int, dropped: int) -> HostStatus:
        """``bad`` more lines skipped and ``dropped`` more never read."""
        if bad or dropped:
            self.status = replace(
                self.status,
                bad_lines=self.status.bad_lines + bad,
                dropped_lines=self.status.dropped_lines + dropped,
            )
        return self.status

    @property
    def delivered(self) -> bool:
        """Whether the current connection has sent a snapshot."""
        return self._delivered

    def ended(self, outcome: Outcome) -> HostStatus:
        """The connection ended: the host takes ``outcome``'s state until the retry, ``next()`` of the backoff away."""
        now = self.clock()
        since = self.status.since if self.status.down() and not self._delivered else now
        self.status = replace(
            self.status,
            state=outcome.state,
            reason=outcome.reason,
            since=since,
            retry_at=now + self.backoff.next(),
            failures=self.status.failures + 1,
        )
        return self.status

    def retry_in(self) -> float:
        """Seconds until the next attempt (0 when it is due)."""
        retry_at = self.status.retry_at
        return 0.0 if retry_at is None else max(0.0, retry_at - self.clock())
