"""The first stage of a run, before the job exists: its outputs opened, where its probe reports go, the dashboard
(or why there is none) and the job's log. Whatever cannot be done here is said before the job starts."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputop.advisor import AdvisorConfig
from gputop.advisor.report import sample_every_s
from gputop.files import check_replaceable, create_fresh
from gputop.probe import channel
from gputop.run.console import Console
from gputop.run.options import RunOptions
from gputop.run.sink import Sink
from gputop.store.recording import Recorder, RecordingError

SAMPLE_EVERY_S = 1.0
"""Headless, how often the job is sampled (more often where the advisor's window needs it)."""


class RunError(Exception):
    """The run cannot start as asked: one line, and the exit status for it."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ReportDir:
    """Where the job's probe reports go."""

    path: str
    problem: str | None = None
    """Why reports are off (None while they are on)."""
    notice: str | None = None
    """Where the usual directory could not be used: the line that says a private one was made for this run."""

    @property
    def made_for_run(self) -> str | None:
        """The private directory made for this run, removed at its end; None for the usual one."""
        return self.path if self.notice else None


@dataclass(frozen=True)
class Prepared:
    """What the job's start needs, made ready."""

    run_id: str
    """In every report the job's processes write (``GPUTOP_RUN_ID``): gputop's PID."""
    reports: ReportDir
    dashboard: Callable[..., int] | None
    """``run_dashboard``, or None: headless, asked or for want of Textual."""
    log_path: str | None = None
    """With a dashboard, the job's output goes to this new file instead of the terminal."""
    log_fd: int | None = None
    sink: Sink | None = None

    def discard(self) -> None:
        """Undo what was made for a job that could not start: the recording closed, the log and the private report
        directory removed."""
        if self.sink is not None:
            self.sink.close()
        with contextlib.suppress(OSError):
            if self.log_path:
                os.unlink(self.log_path)
            if self.reports.made_for_run:
                os.rmdir(self.reports.made_for_run)

    def close_log(self) -> None:
        """The job has its own descriptor of the log now (or never got one)."""
        if self.log_fd is not None:
            os.close(self.log_fd)


def prepare(options: RunOptions, console: Console) -> Prepared:
    """Everything before the job starts. Raises ``RunError`` for an output that cannot be made (exit 2): found
    out after the job, it would have cost the job's whole run."""
    report = options.report_json
    if report is not None and report != "-":
        try:
            check_replaceable(report)
        except OSError as exc:
            raise RunError(f"cannot write --report-json {report}: {exc.strerror or exc}") from None
    sink = None
    if options.record is not None:
        config = options.advisor or AdvisorConfig()
        every_s = sample_every_s(config, SAMPLE_EVERY_S)
        if not options.headless:
            every_s = options.interval_s or 1.0
        try:
            # The run's window goes with its snapshots: report and replay judge them as this run's advisor does.
            sink = Sink(Recorder(options.record, every_s, window_s=config.window_s), console)
        except RecordingError as exc:
            raise RunError(str(exc)) from None
    reports = _report_dir(console)
    dashboard = None
    if not options.headless:
        dashboard, why_not = _dashboard()
        if dashboard is None:
            console.say(f"no dashboard here ({why_not}); running headless")
    run_id = str(os.getpid())
    log_path, log_fd = None, None
    if dashboard is not None and not reports.problem:
        log_path = os.path.join(reports.path, f"run-{run_id}.log")
        try:
            # A new file: one already at its name (an earlier gputop's with this PID, or one put there) is removed,
            # never written through.
            log_fd = create_fresh(log_path)
        except OSError as exc:
            console.say(f"cannot create {log_path}: {exc.strerror}; running headless")
            dashboard, log_path = None, None
    return Prepared(run_id, reports, dashboard, log_path, log_fd, sink)


def _report_dir(console: Console) -> ReportDir:
    """Where the job's reports go, why they cannot (None when they can), and, where the usual directory cannot be
    used, the notice that says a directory was made for this run instead.

    The usual directory has a name every user can predict, so another user can take it first (made as theirs,
    or as a file) to turn a user's reports off. A new private directory then takes its place, made known to the
    job and to this process's readers through ``$GPUTOP_PROBE_DIR``.
    """
    directory = channel.report_dir()
    problem = channel.ensure_dir(directory)
    if problem is None:
        return ReportDir(directory)
    try:
        private = tempfile.mkdtemp(prefix="gputop-probe-")
    except OSError as exc:
        console.say(f"probe reports are off: {problem}; no private directory either: {exc.strerror}")
        return ReportDir(directory, problem)
    os.environ[channel.DIR_ENV] = private
    notice = f"probe reports go to {private}: {problem}"
    console.say(notice)
    return ReportDir(private, None, notice)


def _dashboard() -> tuple[Callable[..., Any] | None, str | None]:
    try:
        from gputop.ui.app import run_dashboard
    except ImportError as exc:
        return None, str(exc)
    return run_dashboard, None
