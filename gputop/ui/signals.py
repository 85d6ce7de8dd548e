"""Sending a signal to a process the user picked, from the UI thread, without psutil.

The row on screen can be older than the process behind its PID: the display may be paused, and a process that
exits leaves its PID free for the next one. So the target is pinned with a pidfd when the dialog opens (Linux
5.3+), and just before sending, the process under that pidfd is checked to have started when the row's process
did; a PID that now names another process is refused with a sentence, never signalled. Where there is no pidfd,
``os.kill`` follows the same check, with the small window between the check and the kill that the platform leaves.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING, Any

from gputop.collect.procstat import CLOCK_TICKS, read_stat
from gputop.formatting import fmt_clock
from gputop.ui.screens.signal_dialog import SignalDialog

if TYPE_CHECKING:
    from textual.app import App

SIGNALS: tuple[tuple[str, signal.Signals], ...] = (
    ("SIGINT", signal.SIGINT),
    ("SIGTERM", signal.SIGTERM),
    ("SIGKILL", signal.SIGKILL),
)

START_TOLERANCE_S = 2 / CLOCK_TICKS
"""How far the start time read now may differ from the row's and still be the same process: both are the
kernel's start tick (10 ms) plus its boot time, computed the same way, so only rounding separates them. When the
clock is stepped, the kernel's boot time moves by a second and a true match is refused; the next refresh of the
row carries the new time and the signal can be sent again."""


class ProcessHandle:
    """A process to signal, pinned by pidfd where the platform allows, and known by when it started."""

    def __init__(self, pid: int, start_time: float | None) -> None:
        self.pid = pid
        self.start_time = start_time
        self._fd: int | None = None
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):  # gone already, or no pidfd support: the send says which
                self._fd = os.pidfd_open(pid)

    def send(self, sig: signal.Signals) -> str | None:
        """Send ``sig`` if the PID still names the process shown; return None on success or why not."""
        try:
            if self._fd is not None:
                # Alive? The pidfd's process holds the PID until it is reaped, so the check below reads it.
                signal.pidfd_send_signal(self._fd, 0)
            stranger = self._not_the_process_shown()
            if stranger:
                return stranger
            if self._fd is not None:
                signal.pidfd_send_signal(self._fd, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            return f"PID {self.pid} has already exited"
        except PermissionError:
            return f"no permission to signal PID {self.pid} (it belongs to another user; try sudo)"
        except OSError as exc:
            return f"could not signal PID {self.pid}: {exc.strerror or exc}"
        return None

    def _not_the_process_shown(self) -> str | None:
        if self.start_time is None:
            return f"not sent: the start time of PID {self.pid} is unknown, so it cannot be told from a later process"
        try:
            started = boot_time() + read_stat(self.pid).start_ticks / CLOCK_TICKS
        except (FileNotFoundError, ProcessLookupError):
            raise ProcessLookupError from None
        if abs(started - self.start_time) <= START_TOLERANCE_S:
            return None
        return (
            f"not sent: PID {self.pid} now belongs to another process "
            f"(started {fmt_clock(started, hundredths=True)}, the one shown at "
            f"{fmt_clock(self.start_time, hundredths=True)}): the one shown has exited and its PID was reused"
        )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def boot_time() -> float:
    """When the system booted, in epoch seconds, as the kernel says it now (``btime`` in /proc/stat)."""
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def elsewhere_words(pid: int) -> str:
    """Why a PID that NVML reports from outside this PID namespace is not signalled."""
    return (
        f"PID {pid} is a host PID from outside this PID namespace (a container without --pid=host): it is no "
        "process here, or another one, so no signal is offered. Run gputop on the host to signal it."
    )


def confirm_and_signal(
    app: App[Any], pid: int, start_time: float | None, user: str | None, command: str | None, *, visible: bool
) -> None:
    """Ask, then send; the outcome (or why it failed) shows as a notification, never as a crash.

    The process is pinned when the dialog opens, before the user decides, and checked at the moment of sending
    to be the one shown (started at ``start_time``): the screen may be paused, or older than the PID's reuse.
    A PID this namespace does not see (``visible`` false: NVML's host PID in a container) is never offered: the
    process of that number here, if any, is another one.
    """
    if not visible:
        app.notify(elsewhere_words(pid), title="Signal not offered", severity="warning", markup=False)
        return
    handle = ProcessHandle(pid, start_time)

    def decided(sig: signal.Signals | None) -> None:
        try:
            if sig is None:
                return
            error = handle.send(sig)
            if error:
                app.notify(error, title="Signal not sent", severity="error")
            else:
                app.notify(f"Sent {sig.name} to PID {pid}", title="Signal sent")
        finally:
            handle.close()

    app.push_screen(SignalDialog(pid, user, command, SIGNALS), decided)
