"""A real run of the demo job, recorded, for the ``demo`` screenshot (scripts/screenshots) and its test.

``tests/data/demo.gputop`` holds the snapshots of ``python -m gputop.demo.job`` on the project's 2-core machine
without a GPU, as ``gputop demo`` samples them (every second, the probe active), made in a checkout reached as
``/home/alice/project`` (so that its command lines show a path a reader might have, not the build machine's)
with::

    .venv/bin/python3 .venv/bin/gputop run --headless --window 8 --record tests/data/demo.gputop \
        -- /home/alice/project/.venv/bin/python3 -m gputop.demo.job --seconds 1800

stopped after about a minute with SIGTERM (the command line is the one ``gputop demo`` runs). Replayed through the
dashboard with the demo's advisor window, the first ``SHOWN_S`` give the screen ``gputop demo`` shows by then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputop.advisor import Advisor, AdvisorConfig
from gputop.demo import NOTICE, WINDOW_S
from gputop.model import Snapshot
from gputop.store import open_recording

RECORDING = Path(__file__).resolve().parents[1] / "data" / "demo.gputop"
SHOWN_S = 45.0


def job_pid(snapshots: list[Snapshot]) -> int:
    """The demo job: the process whose DataLoader the probe reports."""
    return next(v.pid for snap in snapshots for v in snap.training if v.loader is not None)


def snapshots() -> list[Snapshot]:
    """The recorded snapshots of the first ``SHOWN_S`` seconds."""
    with open_recording(RECORDING) as recording:
        recorded = list(recording)
    return [snap for snap in recorded if snap.time - recorded[0].time <= SHOWN_S]


def app_options() -> dict[str, Any]:
    """``GputopApp``'s options as ``gputop demo`` sets them: the focus on the job, its advisor window, its notice."""
    pid = job_pid(snapshots())
    return {"focus_pid": pid, "advisor": Advisor(pid, AdvisorConfig(window_s=WINDOW_S)), "notice": NOTICE}
