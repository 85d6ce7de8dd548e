"""``gputop replay FILE``: the dashboard app over a recording, fed and surrounded by a ``ReplayPlayer``."""

from __future__ import annotations

import sys

from gputop.store import RecordingError, open_recording
from gputop.ui.app import GputopApp
from gputop.ui.replay.player import ReplayPlayer
from gputop.ui.replay.source import ReplayError, ReplaySource
from gputop.ui.replay.time import resolve_time


def replay_app(player: ReplayPlayer, pid: int | None = None, user: str | None = None) -> GputopApp:
    """The dashboard app over ``player``'s recording, following ``pid`` (else the process the recording
    followed); read-only, since nothing on screen is a live process."""
    return GputopApp(
        player, player, interval_s=player.interval_s, focus_pid=player.focus_pid(pid), readonly=True, user=user
    )


def run_replay(
    path: str, speed: float = 1.0, at: str | None = None, pid: int | None = None, paused: bool = False
) -> int:
    """``gputop replay``: returns the exit status; bad input is one line on stderr."""
    try:
        recording = open_recording(path)
    except RecordingError as exc:
        print(f"gputop: error: {exc}", file=sys.stderr)
        return 2
    with recording:
        source = ReplaySource(recording)
        start_time = None
        if at is not None and len(source):
            times = source.times
            try:
                start_time = resolve_time(at, start=times[0], end=times[-1], current=times[0])
            except ValueError as exc:
                print(f"gputop: error: --at: {exc}", file=sys.stderr)
                return 2
        try:
            player = ReplayPlayer(source, speed=speed, start_time=start_time, play=not paused)
        except ReplayError as exc:
            print(f"gputop: error: {exc}", file=sys.stderr)
            return 1
        app = replay_app(player, pid)
        app.run()
    return app.return_code or 0
