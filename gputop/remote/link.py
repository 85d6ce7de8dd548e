"""One connection per host, each on its own thread, so a slow or dead host never holds up another.

``SshLink`` runs ``ssh HOST COMMAND stream --full -d S`` with the user's own ssh (config, keys, agent) and turns
its lines into ``Snapshot``s (``stream.SnapshotStream``: bounded lines, a bounded rate, bad lines counted); when
ssh ends, or sends no snapshot within ``FIRST_SNAPSHOT_S``, it says why (``status.classify``), waits out the
backoff and tries again. ``LocalLink`` samples this machine in-process, as the single-host dashboard does.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from gputop.model import Snapshot
from gputop.remote.hostspec import HostSpec
from gputop.remote.status import FAILED, HostEvent, HostTracker, Outcome, classify, stale_after
from gputop.remote.stream import SnapshotStream

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
FIRST_SNAPSHOT_S = 30.0
"""How long a connection may take to deliver its first snapshot: ssh's ConnectTimeout (10 s) and a login, then
the remote gputop's first snapshot (about a second), with room to spare. Past it, the host is failed and retried."""
STDERR_KEPT_BYTES = 8192
READ_BYTES = 65536
POLL_S = 0.25
STOP_GRACE_S = 2.0
_HOME = re.compile(r"~[A-Za-z0-9._-]*(/|$)")
"""``~`` or ``~user`` at the start of a path, with its slash: what the remote shell expands to a home (only while
unquoted, up to the first slash)."""

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
    return [*ssh_command, *options, "-T", *defaults, "--", spec.name, remote_command(spec.command, interval_s)]


def remote_command(command: str, interval_s: float) -> str:
    """The line the remote user's shell runs (ssh hands it to ``$SHELL -c``).

    ``command`` is quoted into one word, so a path with spaces stays whole and nothing in it is run as shell code;
    only a leading ``~`` or ``~user`` is left outside the quotes, for the shell to expand to that home.
    """
    home = _HOME.match(command)
    prefix = home.group() if home else ""
    rest = command[len(prefix) :]
    return f"{prefix}{shlex.quote(rest) if rest else ''} stream --full -d {interval_s:g}"


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
    settings: dict[str, str] = {}
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
        first_snapshot_s: float = FIRST_SNAPSHOT_S,
    ) -> None:
        self.spec = spec
        self.interval_s = interval_s
        self.first_snapshot_s = first_snapshot_s
        self.argv = ssh_argv(spec, interval_s, ssh_command, ssh_options)
        self._ssh = (tuple(ssh_command), tuple(ssh_options))
        self._configured = False
        self.tracker = HostTracker(spec.name, stale_after(interval_s), clock)
        self._sink = sink
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

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
            ssh, options = self._ssh
            settings = ssh_settings(self.spec, ssh, options)
            self.argv = ssh_argv(self.spec, self.interval_s, ssh, options, settings)
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
        stream = SnapshotStream(self.interval_s)
        try:
            stderr, timed_out = self._read(proc, stream)
        finally:
            self._end(proc)
            self._proc = None
        name, command = self.spec.name, self.spec.command
        others = f', only other lines: "{stream.first_bad}"' if stream.first_bad is not None else ""
        if timed_out:
            return Outcome(FAILED, f"{command} on {name} sent no snapshot in {self.first_snapshot_s:g} s{others}")
        delivered = self.tracker.delivered
        outcome = classify(proc.returncode, stderr, name, command, delivered)
        if stream.bad and not delivered and outcome.state == FAILED:
            return Outcome(FAILED, f"{command} on {name} sent something else than snapshots{others}")
        return outcome

    def _read(self, proc: subprocess.Popen[bytes], stream: SnapshotStream) -> tuple[str, bool]:
        """Hand on stdout's snapshots until it closes; returns stderr's tail, and whether the connection was given
        up for sending no snapshot within ``first_snapshot_s``."""
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout.fileno(), proc.stderr.fileno()
        errors = bytearray()
        first_by = time.monotonic() + self.first_snapshot_s
        counted = (0, 0)
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            selector.register(stderr, selectors.EVENT_READ)
            open_fds = {stdout, stderr}
            deadline = None  # once stdout has closed, stderr gets a moment to say why (a lingering ssh
            # ControlPersist master may hold it open for good)
            while stdout in open_fds or (stderr in open_fds and time.monotonic() < (deadline or 0)):
                if self._stop.is_set():
                    break
                if not self.tracker.delivered and stdout in open_fds and time.monotonic() >= first_by:
                    return errors.decode(errors="replace"), True
                held = stream.wait_s()
                ready = selector.select(POLL_S if held is None else min(POLL_S, held))
                snaps = stream.due()
                for key, _ in ready:
                    chunk = os.read(key.fd, READ_BYTES)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_fds.discard(key.fd)
                        if key.fd == stdout:
                            deadline = time.monotonic() + 1.0
                            snaps += stream.finish()
                    elif key.fd == stderr:
                        errors += chunk
                        del errors[:-STDERR_KEPT_BYTES]
                    else:
                        snaps += stream.feed(chunk)
                counted = self._hand_on(snaps, stream, counted)
        return errors.decode(errors="replace"), False

    def _hand_on(self, snaps: list[Snapshot], stream: SnapshotStream, counted: tuple[int, int]) -> tuple[int, int]:
        """Emit the snapshots, each with the host's status; a new bad line is told at once even without one (the
        dashboard shows the count), while lines dropped for coming too fast are told with the next snapshot."""
        bad, dropped = stream.bad - counted[0], stream.dropped - counted[1]
        status = self.tracker.counted(bad, dropped)
        if bad and not snaps:
            self._emit(HostEvent(status))
        for snap in snaps:
            self._emit(HostEvent(self.tracker.received(), snap))
        return stream.bad, stream.dropped

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

    def _received(self, snap: Snapshot) -> None:
        with self._lock:
            status = self.tracker.received()
        self._sink(HostEvent(status, snap))

    def stop(self) -> None:
        self.sampler.stop()

    def join(self, timeout_s: float = STOP_GRACE_S) -> None:
        """``stop`` already waited for the sampling thread."""
