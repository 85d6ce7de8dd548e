"""``gputop demo``: a small bundled training job, run under the probe and watched, for a first look at gputop.

The job (``gputop.demo.job``) is a real one: a DataLoader whose worker processes decode and augment images on the
CPU for a model that needs far less time per batch, so its loop waits for data. ``gputop demo`` (``gputop.cli.demo``)
starts it through ``gputop run``'s ``run_job`` with an advisor window short enough for a first finding within
seconds, and stops it when the dashboard closes. This module imports neither torch nor the dashboard: the
command line reads its settings on every start.
"""

from __future__ import annotations

import subprocess
import sys

JOB_MODULE = "gputop.demo.job"
WINDOW_S = 8.0
"""The advisor's window for the demo: a steady condition is raised after about 1.8 windows of training."""
STOPPED_BY_SIGNAL = (128 + 2, 128 + 15)
"""The job's exit status when a signal stopped it before it could catch it (SIGINT, SIGTERM): the demo's end."""
NEEDS_TORCH = 'gputop demo needs PyTorch: pip install "gputop-ml[torch]" (in a checkout: pip install ".[torch]")'
NOTICE = "gputop demo: watching its bundled training job. q quits and stops the job."


def torch_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why the job's interpreter cannot import torch (the last line of its error), or None when it can.

    Tried in a child process, as the job will: an installed but broken torch fails there too, and gputop's own
    process stays free of torch.
    """
    result = subprocess.run(
        [sys.executable, "-c", "import torch"],
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"
