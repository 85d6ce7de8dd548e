"""A run from start to end, stage by stage: prepare, start, watch, finish."""

from __future__ import annotations

from gputop.advisor import Advisor
from gputop.run.console import Console
from gputop.run.finish import finish
from gputop.run.job import CannotRun, start_job
from gputop.run.options import RunOptions
from gputop.run.prepare import RunError, prepare
from gputop.run.watch import Watcher, watch


def run_job(options: RunOptions, console: Console) -> int:
    """Run ``options.command`` under the probe to its end, watched; returns its exit status as a shell gives it
    (127 when it cannot be found, 126 when not runnable), or 2 for an output that cannot be made, said before the
    job starts.

    Call it on the main thread: the kernel kills the command when the thread that started it ends.
    """
    try:
        prepared = prepare(options, console)
    except RunError as exc:
        return console.error(str(exc), exc.status)
    try:
        job = start_job(options.command, prepared, options.detach)
    except CannotRun as exc:
        console.say(str(exc))
        return exc.status
    watcher = Watcher(job, Advisor(job.pid, options.advisor), console, prepared.sink)
    watch(job, watcher, prepared, options, console)
    return finish(job, watcher, prepared, options, console)
