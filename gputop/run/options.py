"""What a run is asked to do: the command and its options, as the command line checked them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gputop.advisor import AdvisorConfig

OnClose = Literal["wait", "stop"]
"""What closing the dashboard does to a job still running: wait for it (``gputop run``), or stop it (the demo)."""


@dataclass(frozen=True)
class DashboardOptions:
    """What the dashboard adds to a run; unused headless."""

    notice: str | None = None
    """A line for the banner above what the snapshot calls for (``gputop demo`` says what it runs)."""
    on_close: OnClose = "wait"
    exit_with_job: bool = False
    """Close the dashboard when the job ends, instead of keeping its last view on screen until ``q``."""


@dataclass(frozen=True)
class RunOptions:
    """One run of ``command`` under the probe, watched."""

    command: tuple[str, ...]
    headless: bool = False
    """No dashboard: a status line now and then, the findings at the end."""
    interval_s: float | None = None
    """The dashboard's refresh, or headless the time between status lines; None: the mode's default."""
    advisor: AdvisorConfig | None = None
    report_json: str | None = None
    """A file for the findings and the job's last training views at the end; ``-``: stdout."""
    record: str | None = None
    """A new recording file for every snapshot the advisor sees, from the job's start to its end."""
    detach: bool = False
    """Leave the command running if gputop is killed."""
    dashboard: DashboardOptions = field(default_factory=DashboardOptions)
    history: bool = False
    """Say at the end what changed since the last run of the same command, and keep this run's summary for the
    next (``gputop.run.history``)."""
