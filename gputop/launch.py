"""``gputop run``: start a training command with the probe active, watch it, and return its exit code.

The probe reaches every Python process the command starts through a ``sitecustomize`` put first on
``PYTHONPATH`` (``gputop/probe/_boot``), which chains to any ``sitecustomize`` it shadows. Each of those processes
carries ``GPUTOP_RUN_ID`` in its reports, so at exit the job's last reports are found even for processes that
lived between two ticks.

Signals reach the command once, however they are sent. The command runs in a process group of its own, so a
signal sent to gputop's process group (``kill -- -PGID``, ``kill 0``) reaches gputop alone, which forwards it, as
it forwards one sent to its PID. Headless at a terminal, the command's group is the terminal's foreground group,
as a shell makes its foreground job: Ctrl-C and Ctrl-\\ reach the command from the terminal and not gputop, and
the command can read the terminal. Where gputop keeps the terminal (the dashboard), what the terminal sends
gputop (``si_code`` ``SI_KERNEL``) goes to the command's whole group, as the terminal would have sent it. Telling
these apart needs the sender's ``si_code``, so the forwarded signals are blocked in every thread and taken by one
thread with ``sigwaitinfo``. The command is killed when gputop dies (``PR_SET_PDEATHSIG``), unless detached.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.report import advice_document, render_advice, sample_every_s
from gputop.files import create_fresh, replace_file
from gputop.model import PROBE_NONE, PROBE_OK, TrainingView, job_views
from gputop.probe import channel
from gputop.sanitize import printable

BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe", "_boot")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent itself, such as the terminal's Ctrl-C to its foreground group
PR_SET_PDEATHSIG = 1
HEADLESS_STATUS_EVERY_S = 5.0
SAMPLE_EVERY_S = 1.0
STOP_GRACE_S = 5.0


def probe_env(environ: dict[str, str], directory: str, run_id: str) -> dict[str, str]:
    """The command's environment: the probe's boot directory first on PYTHONPATH, and where reports go."""
    path = environ.get("PYTHONPATH")
    return {
        **environ,
        "PYTHONPATH": BOOT_DIR + (os.pathsep + path if path else ""),
        channel.DIR_ENV: directory,
        channel.RUN_ID_ENV: run_id,
    }


def exit_code(returncode: int) -> int:
    """The command's exit status as a shell reports it: 128 + N for a command killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def stop(child: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """End the command: SIGINT (as Ctrl-C), then SIGTERM and SIGKILL, each after ``grace_s`` more without an exit."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace_s)
            return


def run(
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
        from gputop.store.record import Sink
        from gputop.store.recording import Recorder, RecordingError

        every_s = sample_every_s(advisor.config, SAMPLE_EVERY_S) if headless else interval_s or 1.0
        try:
            sink = Sink(Recorder(record, every_s))
        except RecordingError as exc:
            print(f"gputop: error: {exc}", file=sys.stderr, flush=True)
            return 2
    directory, problem, notice = _report_dir()
    fallback = directory if notice else None
    dashboard = None
    if not headless:
        dashboard, why_not = _dashboard()
        if dashboard is None:
            _say(f"no dashboard here ({why_not}); running headless")
    run_id = str(os.getpid())
    log_path, log_fd = None, None
    if dashboard is not None and not problem:
        log_path = os.path.join(directory, f"run-{run_id}.log")
        try:
            log_fd = _new_log(log_path)
        except OSError as exc:
            _say(f"cannot create {log_path}: {exc.strerror}; running headless")
            dashboard, log_path = None, None
    forwarder = SignalForwarder(_foreground_terminal() if dashboard is None else None)
    job_mask = forwarder.block()
    try:
        child = _start(
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
        _say(f"cannot run {printable(command[0])}: {exc.strerror or exc}")
        return 127 if exc.errno == errno.ENOENT else 126
    finally:
        if log_fd is not None:
            os.close(log_fd)
    forwarder.start(child)
    views: tuple[TrainingView, ...] = ()
    advisor.pid = child.pid
    watcher = _Watcher(child.pid, advisor, sink)
    if sink is not None:
        _say(f"recording to {record}")
    try:
        if dashboard is not None:
            if log_path:
                _say(f"job output goes to {log_path}")
            # The dashboard samples while it is open: its snapshots feed the report's advisor and the recording.
            options = {"advisor_config": advisor_config, "close": forwarder.hung_up, **(dashboard_options or {})}
            if notice and "notice" not in options:
                options["notice"] = notice
            dashboard(interval_s=interval_s or 1.0, pid=child.pid, readonly=False, on_snapshot=watcher.take, **options)
            if child.poll() is None and stop_on_close:
                _say(f"dashboard closed; stopping PID {child.pid}")
                stop(child)
            elif child.poll() is None:
                _say(f"dashboard closed; waiting for PID {child.pid} (kill -INT {os.getpid()} interrupts it)")
        views = watcher.watch(child, status_every_s=interval_s or HEADLESS_STATUS_EVERY_S)
    finally:
        watcher.close()
        if sink is not None:
            sink.close()
            _say(f"recorded {sink.recorder.written} snapshots to {record}")
    code = exit_code(child.wait())
    forwarder.release_terminal()
    if log_path:
        _say(f"job output was written to {log_path}")
    raised = watcher.advisor.raised()
    if headless or dashboard is None:
        _tell(f"gputop: advisor findings for PID {child.pid}:\n{render_advice(raised)}")
    if report_json:
        final = watcher.final_views(views, run_id) if not problem else views
        document = advice_document(
            child.pid,
            raised,
            command=list(command),
            exit_code=code,
            training=[_view_dict(v) for v in final],
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
        _say(f"probe reports are off: {problem}; no private directory either: {exc.strerror}")
        return directory, problem, None
    os.environ[channel.DIR_ENV] = private
    notice = f"probe reports go to {private}: {problem}"
    _say(notice)
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
        _say(f"cannot write {path}: {exc.strerror or exc}")


def _new_log(path: str) -> int:
    """The job's log, a new file. One already at its name (an earlier gputop's with this PID, or one put there)
    is removed, never written through."""
    return create_fresh(path)


def _foreground_terminal() -> int | None:
    """gputop's controlling terminal, opened, when gputop is in its foreground group; else None."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    os.close(fd)
    return None


def _start(
    command: Sequence[str],
    env: dict[str, str],
    log_fd: int | None,
    terminal: int | None,
    mask: set[int | signal.Signals],
    detach: bool,
) -> subprocess.Popen:
    setup = _job_setup(terminal, mask, detach)
    if log_fd is None:
        return subprocess.Popen(list(command), env=env, preexec_fn=setup)
    # The dashboard owns the terminal: the job reads nothing from it and writes to the log.
    return subprocess.Popen(
        list(command), env=env, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT, preexec_fn=setup
    )


def _job_setup(terminal: int | None, mask: set[int | signal.Signals], detach: bool) -> Callable[[], None]:
    """What the job's process does between fork and exec: a process group of its own, the terminal where it is
    given one, death with gputop unless detached, and the signal mask gputop had before it blocked its own."""
    parent = os.getpid()
    prctl = None if detach else ctypes.CDLL(None, use_errno=True).prctl

    def setup() -> None:
        os.setpgid(0, 0)
        if terminal is not None:
            with contextlib.suppress(OSError):  # the terminal has gone: the job runs without it
                os.tcsetpgrp(terminal, os.getpid())  # before exec, so the job never reads it from the background
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL))
            if os.getppid() != parent:  # gputop died before the death signal was set: nothing would send it
                os.kill(os.getpid(), signal.SIGKILL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    return setup


def _dashboard() -> tuple[Callable[..., Any] | None, str | None]:
    try:
        from gputop.ui.app import run_dashboard
    except ImportError as exc:
        return None, str(exc)
    return run_dashboard, None


def _say(message: str) -> None:
    _tell(f"gputop: {message}\n")


def _tell(text: str) -> None:
    """Write to stderr; a terminal that has hung up (EIO) or a closed pipe loses the text, not the job's watch."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _view_dict(view: TrainingView) -> dict[str, Any]:
    from gputop.document import training_to_dict

    return training_to_dict(view)


class SignalForwarder:
    """Passes the signals sent to gputop on to the command, each once; and where the command has the terminal,
    does a shell's part when it stops (Ctrl-Z)."""

    def __init__(self, terminal: int | None = None) -> None:
        self.terminal = terminal
        """gputop's controlling terminal, when the command's group is to be its foreground group (headless, gputop
        in the foreground), else None."""
        self.hung_up = threading.Event()
        """Set when the terminal hangs up (its window closed, the ssh link dropped): gputop must not outlive it."""
        self._child: subprocess.Popen | None = None
        # A stop of the command is seen by its SIGCHLD; it matters only where the command has the terminal.
        self._signals = FORWARDED + ((signal.SIGCHLD,) if terminal is not None else ())

    def block(self) -> set[int | signal.Signals]:
        """Block the signals left to this forwarder in the calling thread, and so in every thread it starts from
        now on, and SIGTTOU, so that gputop can write to the terminal and take it back from a background group.
        Returns the mask from before, for the command."""
        return signal.pthread_sigmask(signal.SIG_BLOCK, (*self._signals, signal.SIGTTOU))

    def start(self, child: subprocess.Popen) -> None:
        self._child = child
        threading.Thread(target=self._run, args=(child,), name="gputop-signals", daemon=True).start()

    def release_terminal(self) -> None:
        """Take the terminal back from the command's group (it has ended), as a shell does, and close it."""
        if self.terminal is None:
            return
        with contextlib.suppress(OSError):
            if self._child is not None and os.tcgetpgrp(self.terminal) == self._child.pid:
                os.tcsetpgrp(self.terminal, os.getpgrp())
        os.close(self.terminal)
        self.terminal = None

    def _run(self, child: subprocess.Popen) -> None:
        while True:
            info = signal.sigwaitinfo(self._signals)
            if info.si_signo == signal.SIGCHLD:
                self._stopped(child)
                continue
            if info.si_signo == signal.SIGHUP:
                # The terminal is gone (its window closed, tmux killed it, the ssh link dropped): the dashboard
                # has nothing left to draw on, so it closes, whether the kernel or a terminal program sent it.
                self.hung_up.set()
            if child.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                if info.si_code != SI_KERNEL:
                    child.send_signal(info.si_signo)  # sent to gputop, or to its group, which the command is not in
                elif self.terminal is None:
                    # The terminal signalled its foreground group, gputop's: the command's group gets it from here,
                    # as it would have from the terminal. Where the command has the terminal, it got it directly.
                    os.killpg(child.pid, info.si_signo)

    def _stopped(self, child: subprocess.Popen) -> None:
        """If the command has stopped (Ctrl-Z), stop gputop too, as the shell expects of its foreground job: take the
        terminal back and stop gputop's group, which hands the terminal to the shell. Once continued (``fg``), give
        the terminal back to the command, and continue it (``bg`` leaves the terminal with the shell)."""
        terminal = self.terminal
        try:
            info = os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOHANG)
        except ChildProcessError:  # it has ended and been reaped
            return
        if info is None or info.si_code != os.CLD_STOPPED or terminal is None:
            return
        own = os.getpgrp()
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(terminal) == child.pid:
                os.tcsetpgrp(terminal, own)
        os.killpg(own, signal.SIGTSTP)  # gputop's group, as the terminal would have stopped it with the command
        # This thread at once, before it goes on: the group's stop may reach it later. Returns once continued, or
        # at once where no shell is left to continue it (an orphaned group is not stopped).
        signal.pthread_kill(threading.get_ident(), signal.SIGTSTP)
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(terminal) == own:
                os.tcsetpgrp(terminal, child.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGCONT)


class _Watcher:
    """Samples the command's process tree on the calling thread until the command exits, feeding the advisor."""

    def __init__(self, pid: int, advisor: Advisor, record: Callable[[Any], None] | None = None) -> None:
        self.pid = pid
        self.advisor = advisor
        self._record = record
        self._advisor_failed = False
        self._maker: Any = None

    def watch(self, child: subprocess.Popen, status_every_s: float) -> tuple[TrainingView, ...]:
        """Wait for the command, printing a status line every ``status_every_s``; returns its last views."""
        from gputop.collect.sampler import SnapshotMaker

        self._maker = SnapshotMaker(focus_pid=self.pid)
        self._maker.start()
        started = time.monotonic()
        status_due = started + status_every_s
        views: tuple[TrainingView, ...] = ()
        every_s = min(sample_every_s(self.advisor.config, SAMPLE_EVERY_S), status_every_s)
        while True:
            try:
                child.wait(timeout=every_s)
                return views
            except subprocess.TimeoutExpired:
                pass
            snap = self._maker.snapshot()
            self.take(snap)
            views = job_views(snap.training, self.pid) or views
            now = time.monotonic()
            if now >= status_due and views:
                _say(status_line(views, now - started))
                status_due = now + status_every_s

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
            _say(f"advisor failed, no findings from now on: {exc!r}")
            self._advisor_failed = True

    def final_views(self, views: tuple[TrainingView, ...], run_id: str) -> tuple[TrainingView, ...]:
        """The last views with each probe report replaced by the last one its process wrote, at its exit."""
        return self._maker.training.final_views(views, run_id) if self._maker is not None else views

    def close(self) -> None:
        if self._maker is not None:
            self._maker.close()


def status_line(views: Sequence[TrainingView], elapsed_s: float) -> str:
    """One line on the job: its busiest view's loader, data wait, throughput, workers, pinning, main thread."""
    from gputop.formatting import fmt_bytes, fmt_duration

    view = max(views, key=lambda v: (v.loader is not None, len(v.workers), -v.pid))
    parts = [f"PID {view.pid} up {fmt_duration(elapsed_s)}"]
    ranks = len(views[0].ranks) if views else 0
    if ranks > 1:
        parts[0] += f", {ranks} ranks"
    loader = view.loader
    if loader is not None:
        cfg = loader.effective if loader.effective.num_workers is not None else loader.requested
        parts.append(f"batch {cfg.batch_size if cfg.batch_size is not None else '?'}")
        if loader.data_wait_share is not None:
            parts.append(f"data wait {loader.data_wait_share * 100:.0f}%")
        if loader.steps_per_s is not None:
            rate = f"{loader.steps_per_s:.1f} steps/s"
            if loader.samples_per_s is not None:
                rate += f" {loader.samples_per_s:.0f} samples/s"
            parts.append(rate)
    workers = f"{len(view.workers)} workers"
    if view.worker_start_method:
        workers += f" ({view.worker_start_method})"
    if view.workers_cpu_percent is not None and view.usable_cpu_count:
        workers += f" {view.workers_cpu_percent / 100:.1f}/{view.usable_cpu_count} cores"
    parts.append(workers)
    parts.append(f"pin_memory {view.pin_memory.state}")
    if view.main_thread.activity:
        parts.append(f"main {view.main_thread.activity}")
    for device in view.probe.cuda:
        parts.append(
            f"cuda:{device.device} alloc {fmt_bytes(device.allocated_bytes)} res {fmt_bytes(device.reserved_bytes)}"
        )
    if view.probe.status not in (PROBE_OK, PROBE_NONE):
        parts.append(f"probe {view.probe.status}")
    return " | ".join(parts)
