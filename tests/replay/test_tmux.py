"""The real ``gputop replay`` in a real terminal (tmux): the timeline bar, a pause and a step, and q."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from tests.replay.recordings import job_snapshots, record
from tests.ui import scenes
from tests.ui.test_tmux import Tmux, gputop_command, tmux  # noqa: F401  (tmux: the fixture)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def offset_s(screen: str) -> int | None:
    """The position's offset in the timeline bar (``+1m04s / 2m58s``), in seconds; None when not on screen."""
    match = re.search(r"\+(?:(\d+)m)?(\d+)s / 2m58s", screen)
    return None if match is None else int(match.group(1) or 0) * 60 + int(match.group(2))


def test_gputop_replay_plays_pauses_and_steps_in_tmux(tmp_path: Path, tmux: Tmux) -> None:  # noqa: F811
    path = record(tmp_path / "job.gputop", job_snapshots())
    status = tmp_path / "exit-status"
    tmux.start_gputop("replay", str(path), "--speed", "4", env={"TZ": "UTC"}, status=status)

    # Textual draws in parts: wait for the whole first frame, status line and timeline bar both.
    screen = tmux.wait_until(
        lambda screen: "▶ playing ×4" in screen and "REPLAY job.gputop" in screen, "the status line and the timeline"
    )
    assert "recorded 2025-11-23 12:10:22 → 12:13:20" in screen
    assert scenes.HOSTNAME in screen
    tmux.wait_until(lambda screen: (offset_s(screen) or 0) >= 4, "playback moving on")

    tmux.run("send-keys", "-t", "gputop", "space")
    screen = tmux.wait_for("‖ paused ×4")
    paused_at = offset_s(screen)
    assert paused_at is not None
    time.sleep(1.0)  # at ×4, two snapshots would have come
    assert offset_s(tmux.screen()) == paused_at

    tmux.run("send-keys", "-t", "gputop", ".")
    tmux.wait_until(lambda screen: offset_s(screen) == paused_at + 2, "one step (2 s) on")

    tmux.run("send-keys", "-t", "gputop", "q")
    assert tmux.exit_status(status) == "0"
