"""The second stage of a run: the job started, and the job while it runs."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from gputop.run.end import JobEnd
from gputop.run.launch import SignalForwarder, foreground_terminal, probe_env, start
from gputop.run.prepare import Prepared
from gputop.sanitize import printable


class CannotRun(Exception):
    """The command could not be started: why, and the shell's exit status for it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Job:
    """The command, started: its process, the thread that forwards signals to it, and its end.

    A thread of its own waits for the process and reaps it the moment it ends, whatever else gputop is doing (the
    dashboard has the main thread): the job never lingers as a zombie, and its end is known at once, with its
    time, to ``wait`` and to every ``on_end`` callback.
    """

    def __init__(self, child: subprocess.Popen, forwarder: SignalForwarder, close: threading.Event) -> None:
        self.child = child
        self.forwarder = forwarder
        self.close = close
        """Set to close the dashboard: the terminal has hung up (the forwarder sets it), or the job has ended and
        the dashboard is not to outlive it."""
        self.pid = child.pid
        self.started = time.monotonic()
        self.end: JobEnd | None = None
        self._ended = threading.Event()
        self._callbacks: list[Callable[[JobEnd], None]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._reap, name="gputop-job-end", daemon=True).start()

    def running_s(self) -> float:
        """How long the job has run: until now, or until its end."""
        return self.end.ran_s if self.end is not None else time.monotonic() - self.started

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` (None: for good) for the job's end; whether it has ended."""
        return self._ended.wait(timeout_s)

    def on_end(self, callback: Callable[[JobEnd], None]) -> None:
        """Call ``callback`` with the job's end, on the reaping thread as it ends, or at once if it has."""
        with self._lock:
            if self.end is None:
                self._callbacks.append(callback)
                return
        callback(self.end)

    def _reap(self) -> None:
        returncode = self.child.wait()
        end = JobEnd(self.pid, returncode, time.time(), time.monotonic() - self.started)
        with self._lock:
            self.end = end
            callbacks, self._callbacks = self._callbacks, []
        self._ended.set()
        for callback in callbacks:
            try:
                callback(end)
            except Exception:  # one listener's fault must not keep the others from hearing of the end
                logging.getLogger(__name__).exception("job end callback failed")


def start_job(command: Sequence[str], prepared: Prepared, detach: bool) -> Job:
    """Start ``command`` with the probe; raises ``CannotRun`` when it cannot be run (127 when it cannot be found,
    126 when not runnable), what was prepared for it undone.

    Call it on the main thread: the kernel kills the command when the thread that started it ends.
    """
    close = threading.Event()
    forwarder = SignalForwarder(foreground_terminal() if prepared.dashboard is None else None, hung_up=close)
    job_mask = forwarder.block()
    env = probe_env(dict(os.environ), prepared.reports.path, prepared.run_id)
    try:
        child = start(command, env, prepared.log_fd, forwarder.terminal, job_mask, detach)
    except OSError as exc:
        forwarder.release_terminal()
        prepared.discard()
        status = 127 if exc.errno == errno.ENOENT else 126
        raise CannotRun(f"cannot run {printable(command[0])}: {exc.strerror or exc}", status) from None
    finally:
        prepared.close_log()
    forwarder.start(child)
    return Job(child, forwarder, close)
