"""``gputop run``'s job, from its start to its end, in four stages: ``prepare`` (the outputs, the probe's report
directory, the dashboard and the job's log, before anything starts), ``start`` (the command with the probe, in a
process group of its own, signals forwarded: ``launch``), ``watch`` (the dashboard or the headless status line,
one advisor and the recording fed every snapshot) and ``finish`` (the exit status, the findings, the report).

``run_job(RunOptions, Console)`` runs them in order (``lifecycle``); ``gputop run`` and ``gputop demo`` parse
their command lines into the options and call it.
"""

from __future__ import annotations

from gputop.run.console import Console
from gputop.run.lifecycle import run_job
from gputop.run.options import DashboardOptions, RunOptions

__all__ = ["Console", "DashboardOptions", "RunOptions", "run_job"]
