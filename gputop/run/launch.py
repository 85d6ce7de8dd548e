"""Starting the job's command with the probe active, forwarding signals to it, stopping it, its exit status.

The rest of the job's life (watching it, the dashboard, the report) is in the other modules of ``gputop.run``.

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
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence

from gputop.probe import channel

BOOT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probe", "_boot")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent itself, such as the terminal's Ctrl-C to its foreground group
PR_SET_PDEATHSIG = 1
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


def foreground_terminal() -> int | None:
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


def start(
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


class SignalForwarder:
    """Passes the signals sent to gputop on to the command, each once; and where the command has the terminal,
    does a shell's part when it stops (Ctrl-Z)."""

    def __init__(self, terminal: int | None = None, hung_up: threading.Event | None = None) -> None:
        self.terminal = terminal
        """gputop's controlling terminal, when the command's group is to be its foreground group (headless, gputop
        in the foreground), else None."""
        self.hung_up = hung_up if hung_up is not None else threading.Event()
        """Set when the terminal hangs up (its window closed, the ssh link dropped): gputop must not outlive it.
        The caller's own event, where it also stands for more (the dashboard's close)."""
        self._child: subprocess.Popen | None = None
        # A stop of the command is seen by its SIGCHLD; it matters only where the command has the terminal.
        self._signals = FORWARDED + ((signal.SIGCHLD,) if terminal is not None else ())

    def block(self) -> set[int | signal.Signals]:
        """Block the signals left to this forwarder in the calling thread, and so in every thread it starts from
        now on, and SIGTTOU, so that gputop can write to the terminal and take it back from a background group.
        Returns the mask from before, for the command."""
        # SIGCONT too where the command has the terminal: blocked, the one that continues gputop after a stop stays
        # pending for the thread that stopped it to take (``_stopped``), where a thread not blocking it would drop it.
        cont = (signal.SIGCONT,) if self.terminal is not None else ()
        return signal.pthread_sigmask(signal.SIG_BLOCK, (*self._signals, signal.SIGTTOU, *cont))

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
        # gputop's group, as the terminal would have stopped it with the command. The stop reaches this thread
        # whenever it comes, maybe only after the next few lines: so it goes on only once continued, told by the
        # SIGCONT that the shell's fg or bg sends (the stop discarded any SIGCONT pending from before). A second
        # SIGTSTP of this thread's own would stop gputop again after fg where the group's stop came first.
        # No shell is left to continue an orphaned group: the kernel does not stop it, and this thread goes on.
        os.killpg(own, signal.SIGTSTP)
        while not _orphaned(own) and signal.sigtimedwait((signal.SIGCONT,), 1.0) is None:
            pass
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(terminal) == own:
                os.tcsetpgrp(terminal, child.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGCONT)


def _orphaned(group: int) -> bool:
    """Whether gputop's process group is orphaned: its parent (the shell) is in no other group of its session, so
    no shell can continue a stop, and the kernel discards a terminal stop signal sent to it."""
    with contextlib.suppress(OSError):
        parent = os.getppid()
        return os.getpgid(parent) == group or os.getsid(parent) != os.getsid(0)
    return True
