"""The second stage of a run: the job started, and the job while it runs."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Sequence

from gputop.run.launch import SignalForwarder, foreground_terminal, probe_env, start
from gputop.run.prepare import Prepared
from gputop.sanitize import printable


class CannotRun(Exception):
    """The command could not be started: why, and the shell's exit status for it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Job:
    """The command, started: its process, the thread that forwards signals to it, and when it started."""

    def __init__(self, child: subprocess.Popen, forwarder: SignalForwarder) -> None:
        self.child = child
        self.forwarder = forwarder
        self.pid = child.pid
        self.started = time.monotonic()

    def running_s(self) -> float:
        """How long the job has been running."""
        return time.monotonic() - self.started


def start_job(command: Sequence[str], prepared: Prepared, detach: bool) -> Job:
    """Start ``command`` with the probe; raises ``CannotRun`` when it cannot be run (127 when it cannot be found,
    126 when not runnable), what was prepared for it undone.

    Call it on the main thread: the kernel kills the command when the thread that started it ends.
    """
    forwarder = SignalForwarder(foreground_terminal() if prepared.dashboard is None else None)
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
    return Job(child, forwarder)
