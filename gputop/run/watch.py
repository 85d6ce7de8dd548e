"""The third stage of a run: the job watched until it ends, on the dashboard while it is open, then headless
(a status line now and then); every snapshot of the job goes to the run's advisor and to the recording."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from gputop.advisor import Advisor
from gputop.advisor.report import sample_every_s
from gputop.collect.sampler import Sampler, SnapshotMaker, every
from gputop.compare.summary import RunTally
from gputop.formatting import counted
from gputop.model import PROCESS_EXITED, Snapshot, TrainingView, job_views
from gputop.run.console import Console
from gputop.run.end import JobEnd
from gputop.run.job import Job
from gputop.run.launch import stop
from gputop.run.options import RunOptions
from gputop.run.prepare import SAMPLE_EVERY_S, Prepared
from gputop.run.status import status_line

HEADLESS_STATUS_EVERY_S = 5.0


def watch(job: Job, watcher: Watcher, prepared: Prepared, options: RunOptions, console: Console) -> None:
    """Watch the job to its end: on the dashboard, if there is one, until it closes; then headless. Closing the
    dashboard while the job runs waits for it, or stops it (``DashboardOptions.on_close``)."""
    sink = prepared.sink
    if sink is not None:
        console.say(f"recording to {options.record}")
    try:
        if prepared.dashboard is not None:
            _dashboard(prepared.dashboard, job, watcher, prepared, options, console)
        watcher.watch(status_every_s=options.interval_s or HEADLESS_STATUS_EVERY_S)
    finally:
        if sink is not None:
            sink.close()
            console.say(f"recorded {counted(sink.recorder.written, 'snapshot')} to {options.record}")


def _dashboard(
    dashboard: Callable[..., int],
    job: Job,
    watcher: Watcher,
    prepared: Prepared,
    options: RunOptions,
    console: Console,
) -> None:
    # Here: a headless run needs no dashboard. The collectors' modules are imported before Textual starts, not by
    # the sampler's thread at its first snapshot, where they would compete with Textual's start for the first frame.
    from gputop.collect import host, training  # noqa: F401
    from gputop.ui.feed import Ended, LiveFeed

    if prepared.log_path:
        console.say(f"job output goes to {prepared.log_path}")
    # The dashboard samples while it is open: its snapshots feed the run's advisor and the recording.
    source = Sampler(options.interval_s or 1.0, maker_factory=lambda: SnapshotMaker(focus_pid=job.pid))
    source.subscribe(watcher.take)
    feed = LiveFeed(source, Advisor(job.pid, options.advisor))
    # Told from the reaping thread, the dashboard says so at once and keeps the job's last view, marked final.
    showing = threading.Event()
    showing.set()

    def tell(end: JobEnd) -> None:
        if showing.is_set():  # not once the dashboard has closed
            feed.end(Ended(end.banner(), watcher.last_view))

    job.on_end(tell)
    if options.dashboard.exit_with_job:
        job.on_end(lambda _: job.close.set())
    dashboard(
        feed,
        interval_s=options.interval_s or 1.0,
        focus_pid=job.pid,
        readonly=False,
        notice=options.dashboard.notice or prepared.reports.notice,
        close=job.close,
    )
    showing.clear()
    if job.end is not None:
        return
    if options.dashboard.on_close == "stop":
        console.say(f"dashboard closed; stopping PID {job.pid}")
        stop(job.child)
    else:
        console.say(f"dashboard closed; waiting for PID {job.pid} (kill -INT {os.getpid()} interrupts it)")


def running(snap: Snapshot, pid: int) -> bool:
    """Whether ``pid`` is running in ``snap``: seen, and neither gone nor a zombie."""
    proc = snap.host_process(pid)
    return proc is not None and proc.status != "zombie" and proc.unavailable.get("status") != PROCESS_EXITED


class Watcher:
    """Takes the job's snapshots until it ends: the dashboard's sampler's while it is open, then its own, made on
    the calling thread; each feeds the recording, if any, and the advisor."""

    def __init__(self, job: Job, advisor: Advisor, console: Console, record: Callable[[Snapshot], None] | None) -> None:
        self.job = job
        self.pid = job.pid
        self.advisor = advisor
        self.views: tuple[TrainingView, ...] = ()
        """The job's last training views seen by ``watch``."""
        self._last_training: Snapshot | None = None
        self._last_running: Snapshot | None = None
        self._record = record
        self._console = console
        self._advisor_failed = False
        self._maker: SnapshotMaker | None = None
        self.tally = RunTally()
        """The run's numbers, for the summary it keeps for the next run of the same command."""

    def watch(self, status_every_s: float) -> None:
        """Wait for the job's end, printing a status line every ``status_every_s``."""
        self._maker = SnapshotMaker(focus_pid=self.pid)
        status_due = self.job.running_s() + status_every_s
        every_s = min(sample_every_s(self.advisor.config, SAMPLE_EVERY_S), status_every_s)
        snapshots = every(every_s, maker=self._maker, first="later", wait=self.job.wait)
        with contextlib.closing(snapshots):
            for snap in snapshots:
                self.take(snap)
                self.views = job_views(snap.training, self.pid) or self.views
                running_s = self.job.running_s()
                if running_s >= status_due and self.views:
                    # The job's own time: the dashboard may have had it for an hour before this watch began.
                    self._console.say(status_line(self.views, running_s))
                    status_due = running_s + status_every_s

    def take(self, snap: Snapshot) -> None:
        """One snapshot: to the recording, if any, and to the advisor, unless taken after the job's end. Called
        from one thread at a time: the dashboard's sampler while it is open, then ``watch``."""
        end = self.job.end
        if end is not None and snap.time > end.at:
            return
        if self._record is not None:
            self._record(snap)
        self._advise(snap)
        self.tally.add(snap)
        if running(snap, self.pid):
            self._last_running = snap
            if any(view.trains for view in job_views(snap.training, self.pid)):
                self._last_training = snap

    @property
    def last_view(self) -> Snapshot | None:
        """The snapshot to keep on screen once the job has ended: the last one taken while it ran and trained
        (a torchrun agent outlives its ranks, and alone shows nothing of the training), else the last one taken
        while it ran."""
        return self._last_training or self._last_running

    def _advise(self, snap: Snapshot) -> None:
        if self._advisor_failed:
            return
        try:
            self.advisor.update(snap)
        except Exception as exc:  # a bug in a rule must cost the advice, never the watch of the job
            self._console.say(f"advisor failed, no findings from now on: {exc!r}")
            self._advisor_failed = True

    def final_views(self, run_id: str) -> tuple[TrainingView, ...]:
        """The last views with each probe report replaced by the last one its process wrote, at its exit."""
        if self._maker is None:
            return self.views
        return self._maker.training.final_views(self.views, run_id)
