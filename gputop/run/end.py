"""How and when the job ended, in words: what the dashboard and the console say once it has."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gputop.formatting import fmt_clock, fmt_duration
from gputop.run.launch import exit_code


@dataclass(frozen=True)
class JobEnd:
    """The job's end, as it was reaped."""

    pid: int
    returncode: int
    """As ``subprocess`` gives it: the exit status, or ``-N`` for a job killed by signal N."""
    at: float
    """When it was reaped, in seconds since the epoch: at once, by a thread that waits for nothing else."""
    ran_s: float

    @property
    def exit_code(self) -> int:
        """gputop's own exit status for it, as a shell gives it: 128 + N for signal N."""
        return exit_code(self.returncode)

    def how(self) -> str:
        """``exit status 1``, ``killed by SIGINT``."""
        if self.returncode >= 0:
            return f"exit status {self.returncode}"
        try:
            name = signal.Signals(-self.returncode).name
        except ValueError:  # a real-time signal has no name of its own
            name = f"signal {-self.returncode}"
        return f"killed by {name}"

    def summary(self) -> str:
        """``ended 14:02:11 after 1:25, killed by SIGINT``."""
        return f"ended {fmt_clock(self.at)} after {fmt_duration(self.ran_s)}, {self.how()}"

    def banner(self) -> str:
        """The dashboard's line on it: ``Job ended 14:02:11 after 1:25, killed by SIGINT · last view kept · q
        quits``, short enough for 80 columns."""
        return f"Job {self.summary()} · last view kept · q quits"
