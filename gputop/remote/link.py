"""One connection per host, each on its own thread, so a slow or dead host never holds up another.

``SshLink`` runs ``ssh HOST COMMAND stream --full -d S`` with the user's own ssh (config, keys, agent) and turns
each line into a ``Snapshot``; when ssh ends, it says why (``status.classify``), waits out the backoff and tries
again. ``LocalLink`` samples this machine in-process, as the single-host dashboard does.
"""

from __future__ import annotations

import logging
import os
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from gputop.remote.hosts import HostSpec
from gputop.remote.status import FAILED, HostEvent, HostTracker, Outcome, classify, stale_after

log = logging.getLogger(__name__)

SSH_OPTIONS = (
    "BatchMode=yes",  # never prompt: no password or passphrase ever reaches gputop
    "ConnectTimeout=10",
    "ServerAliveInterval=5",  # a link that dies silently is noticed within 15 s
    "ServerAliveCountMax=3",
)
"""Given after the user's own options: ssh keeps the first value it gets for an option, so the user's win."""
UNSET = {"connecttimeout": "none", "serveraliveinterval": "0", "serveralivecountmax": "3"}
"""What ``ssh -G`` prints for these options when no ssh config sets them."""
SSH_G_TIMEOUT_S = 5.0
MAX_LINE_BYTES = 64 * 1024 * 1024
STDERR_KEPT_BYTES = 8192
POLL_S = 0.25
STOP_GRACE_S = 2.0

EventSink = Callable[[HostEvent], None]


def ssh_argv(
    spec: HostSpec,
    interval_s: float,
    ssh_command: Sequence[str] = ("ssh",),
    ssh_options: Sequence[str] = (),
    configured: Mapping[str, str] | None = None,
) -> list[str]:
    """The ssh command line for one host: the user's ssh and ``-o`` options first, then gputop's defaults.

    ``configured`` is what ``ssh -G`` says of the host (``ssh_settings``): a default is left out where the user's
    ssh config sets that option itself, so it keeps its value. ``BatchMode=yes`` is always given.
    """
    options = [word for option in ssh_options for word in ("-o", option)]
    wanted = [option for option in SSH_OPTIONS if configured is None or _left_unset(option, configured)]
    defaults = [word for option in wanted for word in ("-o", option)]
    remote = f"{spec.command} stream --full -d {interval_s:g}"
    return [*ssh_command, *options, "-T", *defaults, "--", spec.name, remote]


def _left_unset(option: str, configured: Mapping[str, str]) -> bool:
    """Whether the user's ssh config leaves ``option`` at ssh's default (BatchMode counts as unset: it is always
    given, so that ssh never prompts)."""
    key = option.split("=")[0].lower()
    return key not in UNSET or configured.get(key, UNSET[key]) == UNSET[key]


def ssh_settings(
    spec: HostSpec, ssh_command: Sequence[str] = ("ssh",), ssh_options: Sequence[str] = ()
) -> dict[str, str] | None:
    """The options ssh would use for the host, from ``ssh -G`` (it reads the config, connects nowhere); None when
    that cannot be told (an ssh without ``-G``): then gputop's defaults are all given."""
    options = [word for option in ssh_options for word in ("-o", option)]
    try:
        done = subprocess.run(
            [*ssh_command, *options, "-G", "--", spec.name],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SSH_G_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    settings = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        settings.setdefault(key.lower(), value.strip())
    return settings


class SshLink:
    """Streams one remote host's snapshots over ssh until ``stop``; reconnects with backoff."""

    def __init__(
        self,
        spec: HostSpec,
        interval_s: float,
        sink: EventSink,
        ssh_command: Sequence[str] = ("ssh",),
        ssh_options: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.argv = ssh_argv(spec, interval_s, ssh_command, ssh_options)
        self._ssh = (tuple(ssh_command), tuple(ssh_options), interval_s)
        self._configured = False
        self.tracker = HostTracker(spec.name, stale_after(interval_s), clock)
        self._sink = sink
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._pending = b""
        """stdout after its last newline"""
        self._bad_line: str | None = None
        """The first line of this connection that was not a snapshot."""

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"gputop-host-{self.spec.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()

    def join(self, timeout_s: float = STOP_GRACE_S) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _emit(self, event: HostEvent) -> None:
        try:
            self._sink(event)
        except Exception:  # the dashboard's problem must not end the connection
            log.exception("host event subscriber failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            self._emit(HostEvent(self.tracker.connecting()))
            try:
                outcome = self._session()
            except Exception as exc:  # a bug here must end this attempt, not the thread or the others
                log.exception("connection to %s failed", self.spec.name)
                outcome = Outcome(FAILED, f"internal error: {exc!r}")
            if self._stop.is_set():
                return
            self._emit(HostEvent(self.tracker.ended(outcome)))
            self._stop.wait(self.tracker.retry_in())

    def _session(self) -> Outcome:
        if not self._configured:  # once, on the link's own thread: reading the config can be slow (Match exec)
            self._configured = True
            command, options, interval_s = self._ssh
            settings = ssh_settings(self.spec, command, options)
            self.argv = ssh_argv(self.spec, interval_s, command, options, settings)
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # no terminal: ssh can never prompt on the dashboard's screen
            )
        except OSError as exc:
            return Outcome(FAILED, f"cannot run {shlex.join(self.argv[:1])}: {exc.strerror or exc}")
        self._proc = proc
        try:
            stderr, bad_line = self._read(proc)
        finally:
            self._end(proc)
            self._proc = None
        delivered = self.tracker.delivered
        outcome = classify(proc.returncode, stderr, self.spec.name, self.spec.command, delivered)
        if bad_line is not None and not delivered and outcome.state == FAILED:
            return Outcome(FAILED, f"{self.spec.command} on {self.spec.name} sent something else than snapshots")
        return outcome

    def _read(self, proc: subprocess.Popen[bytes]) -> tuple[str, str | None]:
        """Turn stdout's lines into snapshots until it closes; returns stderr's tail and the first bad line."""
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout.fileno(), proc.stderr.fileno()
        self._pending = b""
        self._bad_line = None
        errors = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            selector.register(stderr, selectors.EVENT_READ)
            open_fds = {stdout, stderr}
            deadline = None  # once stdout has closed, stderr gets a moment to say why (a lingering ssh
            # ControlPersist master may hold it open for good)
            while stdout in open_fds or (stderr in open_fds and time.monotonic() < (deadline or 0)):
                if self._stop.is_set():
                    break
                for key, _ in selector.select(POLL_S):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_fds.discard(key.fd)
                        if key.fd == stdout:
                            deadline = time.monotonic() + 1.0
                    elif key.fd == stderr:
                        errors += chunk
                        del errors[:-STDERR_KEPT_BYTES]
                    elif not self._take(chunk):
                        return errors.decode(errors="replace"), "a line too long to be a snapshot"
        return errors.decode(errors="replace"), self._bad_line

    def _take(self, chunk: bytes) -> bool:
        """Split stdout into lines and hand on each snapshot; False when a line grows past any snapshot's size."""
        from gputop.store import snapshot_from_json

        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                snap = snapshot_from_json(line)
            except ValueError:  # a login banner, or not gputop at all: remembered, not fatal
                self._bad_line = self._bad_line or line[:80].decode(errors="replace")
                continue
            self._emit(HostEvent(self.tracker.received(), snap))
        return len(self._pending) <= MAX_LINE_BYTES

    @staticmethod
    def _end(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


class LocalLink:
    """This machine, sampled in-process by a ``Sampler`` thread, reported like a remote host."""

    def __init__(
        self, spec: HostSpec, interval_s: float, sink: EventSink, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from gputop.collect.sampler import Sampler

        self.spec = spec
        self.tracker = HostTracker(spec.name, stale_after(interval_s), clock)
        self.sampler = Sampler(interval_s)
        self._sink = sink
        self._lock = threading.Lock()

    def start(self) -> None:
        self._sink(HostEvent(self.tracker.connecting()))
        self.sampler.subscribe(self._received)
        self.sampler.start()

    def _received(self, snap: object) -> None:
        with self._lock:
            status = self.tracker.received()
        self._sink(HostEvent(status, snap))  # type: ignore[arg-type]

    def stop(self) -> None:
        self.sampler.stop()

    def join(self, timeout_s: float = STOP_GRACE_S) -> None:
        """``stop`` already waited for the sampling thread."""
