"""``gputop replay FILE``: the dashboard app over a recording, fed and surrounded by a ``ReplayPlayer``."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import BindingType

from gputop.store import RecordingError, open_recording
from gputop.ui.app import GputopApp
from gputop.ui.replay.player import BINDINGS, ReplayPlayer
from gputop.ui.replay.source import ReplayError, ReplaySource
from gputop.ui.replay.time import resolve_time


class ReplayApp(GputopApp):
    """The dashboard app with the replay's keys app-wide: Textual merges them over ``GputopApp.BINDINGS``, a key
    of both (``p``) taking the replay's."""

    BINDINGS: ClassVar[list[BindingType]] = BINDINGS


def replay_app(player: ReplayPlayer, pid: int | None = None, user: str | None = None) -> ReplayApp:
    """The dashboard app over ``player``'s recording, following ``pid`` (else the process the recording
    followed); read-only, since nothing on screen is a live process."""
    return ReplayApp(
        player, player, interval_s=player.interval_s, focus_pid=player.focus_pid(pid), readonly=True, user=user
    )


class CannotReplay(Exception):
    """The recording cannot be shown: why, in one line, and the exit status for it (2: bad input, 1: a
    recording with nothing readable yet)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def run_replay(
    path: str, speed: float = 1.0, at: str | None = None, pid: int | None = None, paused: bool = False
) -> int:
    """``gputop replay``: returns the exit status once the user quits; ``CannotReplay`` before it starts."""
    try:
        recording = open_recording(path)
    except RecordingError as exc:
        raise CannotReplay(str(exc), 2) from None
    with recording:
        source = ReplaySource(recording)
        start_time = None
        if at is not None and len(source):
            times = source.times
            try:
                start_time = resolve_time(at, start=times[0], end=times[-1], current=times[0])
            except ValueError as exc:
                raise CannotReplay(f"--at: {exc}", 2) from None
        try:
            player = ReplayPlayer(source, speed=speed, start_time=start_time, play=not paused)
        except ReplayError as exc:
            raise CannotReplay(str(exc), 1) from None
        app = replay_app(player, pid)
        app.run()
    return app.return_code or 0
