"""Sending a signal to a process the user picked, from the UI thread, without psutil.

The target is pinned with a pidfd when the dialog opens (Linux 5.3+), so if the process exits and its PID is
reused while the user reads the dialog, the signal cannot reach the stranger; elsewhere ``os.kill`` is the fallback.
"""

from __future__ import annotations

import contextlib
import os
import signal

SIGNALS: tuple[tuple[str, signal.Signals], ...] = (
    ("SIGINT", signal.SIGINT),
    ("SIGTERM", signal.SIGTERM),
    ("SIGKILL", signal.SIGKILL),
)


class ProcessHandle:
    """A process to signal, pinned by pidfd where the platform allows."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd: int | None = None
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):  # gone already, or no pidfd support: os.kill will say so
                self._fd = os.pidfd_open(pid)

    def send(self, sig: signal.Signals) -> str | None:
        """Send ``sig``; return None on success or a sentence saying why it failed."""
        try:
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

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
