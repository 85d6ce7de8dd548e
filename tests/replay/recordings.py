"""Recordings for the replay's tests, written by the real ``Recorder`` from the scripted snapshots of tests/ui."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from gputop.model import Snapshot
from gputop.store import Recorder
from tests.ui import scenes, training_scenes

STARVED_TICKS = 50
FED_TICKS = 40
"""The job waits for its data for 100 s, then is fed for 80 s: findings appear after the advisor's window and
clear about a window after the fix."""


def starved_then_fed(t: float) -> Snapshot:
    """``starved_job`` for the first ``STARVED_TICKS`` ticks, then ``fed_job``, the whole ending at ``scenes.T0``."""
    fixed_at = scenes.T0 - (FED_TICKS - 0.5) * scenes.TICK_S
    return training_scenes.starved_job(t) if t < fixed_at else training_scenes.fed_job(t)


def job_snapshots() -> list[Snapshot]:
    return scenes.history(starved_then_fed, STARVED_TICKS + FED_TICKS)


def record(path: Path, snapshots: Sequence[Snapshot], *, ended: bool = True) -> Path:
    """Write ``snapshots`` to a new recording at ``path``; ``ended=False`` leaves it as a killed recorder would."""
    with Recorder(path, scenes.TICK_S, hostname=scenes.HOSTNAME, started=snapshots[0].time) as recorder:
        for snap in snapshots:
            recorder.append(snap)
    if not ended:
        db = sqlite3.connect(path)
        db.execute("DELETE FROM meta WHERE key = 'ended'")
        db.commit()
        db.close()
    return path


def recorded(path: Path, make: Callable[[], list[Snapshot]] = job_snapshots) -> tuple[Path, list[Snapshot]]:
    snapshots = make()
    return record(path, snapshots), snapshots
