"""Running a command under the probe and watching it, for ``gputop run`` and ``gputop demo``: the report
directory, the job's log, the dashboard or the headless watch, the advisor, the recording and the report at the
end.

Starting the command, with the probe on its ``PYTHONPATH``, in a process group of its own, and forwarding signals
to it once, is ``gputop.launch``'s.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.report import advice_document, render_advice, sample_every_s
from gputop.cli.console import error, say, tell
from gputop.collect.sampler import SnapshotMaker, every
from gputop.document import training_to_dict
from gputop.files import create_fresh, replace_file
from gputop.formatting import counted
from gputop.launch import SignalForwarder, exit_code, foreground_terminal, probe_env, start, status_line, stop
from gputop.model import Snapshot, TrainingView, job_views
from gputop.probe import channel
from gputop.sanitize import printable
from gputop.store.recording import Recorder, RecordingError

HEADLESS_STATUS_EVERY_S = 5.0
SAMPLE_EVERY_S = 1.0


def run_job(
    command: Sequence[str],
    headless: bool,
    report_json: str | None,
    interval_s: float | None,
    advisor_config: AdvisorConfig | None = None,
    record: str | None = None,
    dashboard_options: dict[str, Any] | None = None,
    stop_on_close: bool = False,
    detach: bool = False,
) -> int:
    """Run ``command`` to its end; returns its exit status (127 when it cannot be found, 126 when not runnable).

    Headless, the advisor's findings are printed on stderr when the command ends; ``report_json`` names a file
    (``-``: stdout) for them and the job's last training views. ``record`` names a new recording file that gets
    every snapshot the advisor sees, from the job's start to its end; one that cannot be created is an error
    (exit 2) before the job starts. ``dashboard_options`` go to ``run_dashboard`` as they are; with
    ``stop_on_close``, closing the dashboard stops the command (``stop``) instead of waiting for it. The command
    is killed if gputop dies first, unless ``detach``.

    Call it on the main thread: the kernel kills the command when the thread that started it ends.
    """
    advisor = Advisor(None, advisor_config)  # its pid is set once the job has one
    sink = None
    if record is not None:
        every_s = sample_every_s(advisor.config, SAMPLE_EVERY_S) if headless else interval_s or 1.0
        try:
            sink = Sink(Recorder(record, every_s))
        except RecordingError as exc:
            return error(str(exc), 2)
    directory, problem, notice = _report_dir()
    fallback = directory if notice else None
    dashboard = None
    if not headless:
        dashboard, why_not = _dashboard()
        if dashboard is None:
            say(f"no dashboard here ({why_not}); running headless")
    run_id = str(os.getpid())
    log_path, log_fd = None, None
    if dashboard is not None and not problem:
        log_path = os.path.join(directory, f"run-{run_id}.log")
        try:
            log_fd = new_log(log_path)
        except OSError as exc:
            say(f"cannot create {log_path}: {exc.strerror}; running headless")
            dashboard, log_path = None, None
    forwarder = SignalForwarder(foreground_terminal() if dashboard is None else None)
    job_mask = forwarder.block()
    try:
        child = start(
            command, probe_env(dict(os.environ), directory, run_id), log_fd, forwarder.terminal, job_mask, detach
        )
    except OSError as exc:
        forwarder.release_terminal()
        if sink is not None:
            sink.close()
        with contextlib.suppress(OSError):
            if log_path:
                os.unlink(log_path)
            if fallback:
                os.rmdir(fallback)
        say(f"cannot run {printable(command[0])}: {exc.strerror or exc}")
        return 127 if exc.errno == errno.ENOENT else 126
    finally:
        if log_fd is not None:
            os.close(log_fd)
    forwarder.start(child)
    views: tuple[TrainingView, ...] = ()
    advisor.pid = child.pid
    watcher = _Watcher(child.pid, advisor, sink)
    if sink is not None:
        say(f"recording to {record}")
    try:
        if dashboard is not None:
            if log_path:
                say(f"job output goes to {log_path}")
            # The dashboard samples while it is open: its snapshots feed the report's advisor and the recording.
            options = {"advisor_config": advisor_config, "close": forwarder.hung_up, **(dashboard_options or {})}
            if notice and "notice" not in options:
                options["notice"] = notice
            dashboard(interval_s=interval_s or 1.0, pid=child.pid, readonly=False, on_snapshot=watcher.take, **options)
            if child.poll() is None and stop_on_close:
                say(f"dashboard closed; stopping PID {child.pid}")
                stop(child)
            elif child.poll() is None:
                say(f"dashboard closed; waiting for PID {child.pid} (kill -INT {os.getpid()} interrupts it)")
        views = watcher.watch(child, status_every_s=interval_s or HEADLESS_STATUS_EVERY_S)
    finally:
        if sink is not None:
            sink.close()
            say(f"recorded {counted(sink.recorder.written, 'snapshot')} to {record}")
    code = exit_code(child.wait())
    forwarder.release_terminal()
    if log_path:
        say(f"job output was written to {log_path}")
    raised = watcher.advisor.raised()
    if headless or dashboard is None:
        tell(f"gputop: advisor findings for PID {child.pid}:\n{render_advice(raised)}")
    if report_json:
        final = watcher.final_views(views, run_id) if not problem else views
        document = advice_document(
            child.pid,
            raised,
            command=list(command),
            exit_code=code,
            training=[training_to_dict(v) for v in final],
        )
        _write_report(report_json, document)
    if not problem:
        channel.remove_dead_reports(directory)
    if fallback:
        with contextlib.suppress(OSError):  # kept while it holds the job's log
            os.rmdir(fallback)
    return code


def _report_dir() -> tuple[str, str | None, str | None]:
    """Where the job's reports go, why they cannot (None when they can), and, where the usual directory cannot be
    used, the notice that says a directory was made for this run instead.

    The usual directory has a name every user can predict, so another user can take it first (made as theirs,
    or as a file) to turn a user's reports off. A new private directory then takes its place, made known to the
    job and to this process's readers through ``$GPUTOP_PROBE_DIR``.
    """
    directory = channel.report_dir()
    problem = channel.ensure_dir(directory)
    if problem is None:
        return directory, None, None
    try:
        private = tempfile.mkdtemp(prefix="gputop-probe-")
    except OSError as exc:
        say(f"probe reports are off: {problem}; no private directory either: {exc.strerror}")
        return directory, problem, None
    os.environ[channel.DIR_ENV] = private
    notice = f"probe reports go to {private}: {problem}"
    say(notice)
    return private, None, notice


def _write_report(path: str, document: dict[str, Any]) -> None:
    """Write the report atomically (a reader never sees half of it), private to the user (it holds the command
    line), never through a name planted in a shared directory; ``-`` is one line, the last on stdout, after the
    job's own output. A file that cannot be written is said on stderr: the exit status stays the job's."""
    text = json.dumps(document, separators=(",", ":")) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        replace_file(path, text.encode())
    except OSError as exc:
        say(f"cannot write {path}: {exc.strerror or exc}")


def new_log(path: str) -> int:
    """The job's log, a new file. One already at its name (an earlier gputop's with this PID, or one put there)
    is removed, never written through."""
    return create_fresh(path)


def _dashboard() -> tuple[Callable[..., Any] | None, str | None]:
    try:
        from gputop.ui.app import run_dashboard
    except ImportError as exc:
        return None, str(exc)
    return run_dashboard, None


class _Watcher:
    """Samples the command's process tree on the calling thread until the command exits, feeding the advisor."""

    def __init__(self, pid: int, advisor: Advisor, record: Callable[[Any], None] | None = None) -> None:
        self.pid = pid
        self.advisor = advisor
        self._record = record
        self._advisor_failed = False
        self._maker: SnapshotMaker | None = None

    def watch(self, child: subprocess.Popen, status_every_s: float) -> tuple[TrainingView, ...]:
        """Wait for the command, printing a status line every ``status_every_s``; returns its last views."""
        self._maker = SnapshotMaker(focus_pid=self.pid)
        started = time.monotonic()
        status_due = started + status_every_s
        views: tuple[TrainingView, ...] = ()
        every_s = min(sample_every_s(self.advisor.config, SAMPLE_EVERY_S), status_every_s)
        snapshots = every(every_s, maker=self._maker, first="later", wait=lambda s: _ended(child, s))
        with contextlib.closing(snapshots):
            for snap in snapshots:
                self.take(snap)
                views = job_views(snap.training, self.pid) or views
                now = time.monotonic()
                if now >= status_due and views:
                    say(status_line(views, now - started))
                    status_due = now + status_every_s
        return views

    def take(self, snap: Any) -> None:
        """One snapshot of the job: to the recording, if any, and to the advisor. Called from one thread at a
        time: the dashboard's sampler while it is open, then ``watch``."""
        if self._record is not None:
            self._record(snap)
        self._advise(snap)

    def _advise(self, snap: Any) -> None:
        if self._advisor_failed:
            return
        try:
            self.advisor.update(snap)
        except Exception as exc:  # a bug in a rule must cost the advice, never the watch of the job
            say(f"advisor failed, no findings from now on: {exc!r}")
            self._advisor_failed = True

    def final_views(self, views: tuple[TrainingView, ...], run_id: str) -> tuple[TrainingView, ...]:
        """The last views with each probe report replaced by the last one its process wrote, at its exit."""
        return self._maker.training.final_views(views, run_id) if self._maker is not None else views


def _ended(child: subprocess.Popen, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the command to end; whether it has."""
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


class Sink:
    """Feeds a recording from a live view (``gputop run --record``): callable with each snapshot, from any thread.

    A write error (a full disk) is said once on stderr and ends the recording, never the caller: the job and its
    dashboard go on. What was committed before stays readable.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.failed = False

    def __call__(self, snap: Snapshot) -> None:
        if self.failed:
            return
        try:
            self.recorder.append(snap)
        except RecordingError as exc:
            self.failed = True
            error(f"{exc}; recording stopped", 1)

    def close(self) -> None:
        try:
            self.recorder.close()
        except RecordingError as exc:
            error(str(exc), 1)
