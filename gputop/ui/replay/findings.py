"""The advisor over a whole recording, computed once: the replay shows the findings of the snapshot on screen as
the live advisor gave them at that time. Nothing here imports Textual."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gputop.advisor.timeline import AdviceTimeline, advise
from gputop.advisor.window import AdvisorConfig
from gputop.model import Advice, Snapshot
from gputop.store import RecordingError, open_recording


@dataclass(frozen=True)
class Findings:
    """The advisor over the whole recording: its findings at each position, and their highest severity rank."""

    timeline: AdviceTimeline
    advice_at: list[int]
    """The timeline's index for each position (a row that could not be read keeps the findings before it)."""
    marks: list[int]
    """The highest severity rank of the findings at each position, -1 for none (the timeline strip)."""
    undecodable: int
    """Rows that could not be read or decoded: stepped over by the replay, left out by the advisor."""

    def at(self, position: int) -> tuple[Advice, ...]:
        return self.timeline.at(self.advice_at[position]) if 0 <= position < len(self.advice_at) else ()


def compute_findings(
    path: str, rows: list[int], pid: int | None, config: AdvisorConfig | None, progress: Callable[[int], bool]
) -> Findings | None:
    """Run the advisor over the rows of the recording at ``path``, read through a connection of its own.

    ``progress(done)`` is called before each row; when it returns False the work stops and None is returned.
    """
    decoded: list[int] = []
    stopped = False

    with open_recording(path) as recording:

        def snapshots() -> Iterator[Snapshot]:
            nonlocal stopped
            for position, rowid in enumerate(rows):
                if not progress(position):
                    stopped = True
                    return
                try:
                    snap = recording.read(rowid)
                except RecordingError:
                    continue
                decoded.append(position)
                yield snap

        timeline = advise(snapshots(), pid, config)
    if stopped:
        return None
    advice_at = [bisect.bisect_right(decoded, position) - 1 for position in range(len(rows))]
    marks = [max((a.severity_rank for a in timeline.at(k)), default=-1) for k in advice_at]
    return Findings(timeline, advice_at, marks, len(rows) - len(decoded))
