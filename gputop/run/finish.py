"""The last stage of a run, once the job has ended: its exit status, the findings, ``--report-json``, and what
the run made for the job cleared away."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from gputop.advisor import AdvisorConfig
from gputop.advisor.report import advice_document, render_advice
from gputop.compare.render import since_last_run
from gputop.document import training_to_dict
from gputop.files import replace_file
from gputop.model import Advice
from gputop.probe import channel
from gputop.run import history
from gputop.run.console import Console
from gputop.run.job import Job
from gputop.run.options import RunOptions
from gputop.run.prepare import Prepared
from gputop.run.watch import Watcher


def finish(job: Job, watcher: Watcher, prepared: Prepared, options: RunOptions, console: Console) -> int:
    """Say what the run has to say at the end; returns the job's exit status as a shell gives it."""
    job.wait()
    end = job.end
    assert end is not None  # set before wait returns
    code = end.exit_code
    job.forwarder.release_terminal()
    if prepared.log_path:
        console.say(f"job output was written to {prepared.log_path}")
    raised = watcher.advisor.raised()
    # Where no dashboard showed them until the user quit, the end and the findings are said here.
    unseen = options.headless or prepared.dashboard is None or options.dashboard.exit_with_job
    if unseen and prepared.dashboard is not None:
        console.say(f"PID {job.pid} {end.summary()}")
    if unseen:
        console.tell(f"gputop: advisor findings for PID {job.pid}:\n{render_advice(raised)}")
    if options.history:
        remember(watcher, [advice for advice, _ in raised], options, console)
    reports = prepared.reports
    if options.report_json:
        final = watcher.final_views(prepared.run_id) if not reports.problem else watcher.views
        document = advice_document(
            job.pid,
            raised,
            command=list(options.command),
            exit_code=code,
            training=[training_to_dict(v) for v in final],
        )
        _write_report(options.report_json, document, console)
    if not reports.problem:
        channel.remove_dead_reports(reports.path)
    if reports.made_for_run:
        with contextlib.suppress(OSError):  # kept while it holds the job's log
            os.rmdir(reports.made_for_run)
    return code


def remember(watcher: Watcher, findings: list[Advice], options: RunOptions, console: Console) -> None:
    """Say what changed since the last run of this command, if there was one, and keep this run's summary in its
    place. Never fails the run: a kept summary that cannot be trusted is said and replaced; one that cannot be
    written is said."""
    command, cwd = " ".join(options.command), os.getcwd()
    window_s = (options.advisor or AdvisorConfig()).window_s
    try:
        summary = watcher.tally.summary("this run", "run", window_s, findings, command=command)
    except Exception as exc:  # a fault in the summary costs the line, never the run's exit status
        console.say(f"no summary of this run: {exc!r}")
        return
    if summary is None:
        return  # no training process: nothing to compare with, next time either
    path = history.state_dir() / history.key_of(command, cwd)
    try:
        previous = history.recall(path, command, cwd)
    except history.Unreadable as exc:
        console.say(f"the last run's summary was left out: {exc}")
        previous = None
    if previous is not None:
        console.say(since_last_run(previous, summary))
    try:
        history.keep(path, summary, command, cwd)
    except OSError as exc:
        console.say(f"cannot keep this run's summary for the next: {exc.strerror or exc}")


def _write_report(path: str, document: dict[str, Any], console: Console) -> None:
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
        console.say(f"cannot write {path}: {exc.strerror or exc}")
