"""The replay's cache of decoded snapshots: bounded by count and by the memory its snapshots hold, each whole
snapshot counted once however many rows of changes share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.model import Snapshot
from gputop.store import WeighedSnapshot, open_recording
from gputop.store.rows import KEYFRAME_EVERY
from gputop.ui.replay.cache import MOST_BYTES, MOST_SNAPSHOTS, SnapshotCache
from gputop.ui.replay.source import ReplaySource
from tests.replay.recordings import job_snapshots, record
from tests.ui import scenes

pytestmark = pytest.mark.fast

SNAP = scenes.no_driver()


def weighed(own: int, whole_row: int, whole: int) -> WeighedSnapshot:
    return WeighedSnapshot(SNAP, own, whole_row, whole)


def test_a_whole_snapshot_shared_by_rows_of_changes_is_counted_once() -> None:
    cache = SnapshotCache()
    cache.add(0, weighed(0, 1, 1000))  # the whole snapshot of row 1
    cache.add(1, weighed(10, 1, 1000))  # rows of changes from it
    cache.add(2, weighed(20, 1, 1000))
    assert cache.held_bytes == 1030


def test_a_row_of_changes_keeps_its_whole_snapshot_counted_when_that_one_is_dropped() -> None:
    """Its unchanged values are the whole snapshot's: it keeps them alive, kept or not."""
    cache = SnapshotCache(most_snapshots=2)
    cache.add(0, weighed(0, 1, 1000))
    cache.add(5, weighed(10, 1, 1000))
    cache.add(70, weighed(0, 61, 2000))  # drops position 0, the whole snapshot itself
    assert (len(cache), cache.held_bytes) == (2, 10 + 1000 + 2000)
    cache.add(71, weighed(10, 61, 2000))  # drops position 5, the last that shared row 1
    assert cache.held_bytes == 2000 + 10


def test_the_least_recently_used_are_dropped_past_the_byte_bound() -> None:
    cache = SnapshotCache(most_bytes=3000)
    for position in range(5):
        cache.add(position, weighed(0, position + 1, 1000))
    assert cache.get(2) is SNAP  # used: kept
    cache.add(5, weighed(0, 6, 1000))
    assert [p for p in range(6) if cache.get(p) is not None] == [2, 4, 5]
    assert cache.held_bytes == 3000


def test_one_snapshot_over_the_bound_is_kept_alone() -> None:
    cache = SnapshotCache(most_bytes=3000)
    cache.add(0, weighed(0, 1, 1000))
    cache.add(1, weighed(0, 2, 5000))
    assert (len(cache), cache.get(1), cache.held_bytes) == (1, SNAP, 5000)


def test_adding_a_position_again_replaces_it() -> None:
    cache = SnapshotCache()
    cache.add(0, weighed(0, 1, 1000))
    cache.add(0, weighed(0, 1, 1000))
    assert (len(cache), cache.held_bytes) == (1, 1000)


def test_a_real_recording_is_kept_whole_within_the_bound(tmp_path: Path) -> None:
    """The bound leaves the replay of a real job what the count alone gave it: every snapshot of its graphs."""
    snapshots = job_snapshots()
    assert len(snapshots) > KEYFRAME_EVERY  # whole snapshots and rows of changes
    with open_recording(record(tmp_path / "job.gputop", snapshots)) as recording:
        source = ReplaySource(recording)
        read: list[Snapshot | None] = [source.read(position) for position in range(len(source))]
        assert read == snapshots
        assert len(source.cache) == len(snapshots)
        per_snapshot = source.cache.held_bytes / len(snapshots)
    assert per_snapshot * MOST_SNAPSHOTS < MOST_BYTES / 2
