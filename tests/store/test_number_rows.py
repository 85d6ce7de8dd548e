"""Rows of numbers (recording format 5): a row of changes laid out as the first one after its whole snapshot holds
its numbers alone, packed against that first row's (docs/recording.md, "Rows of numbers")."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import struct
import zlib
from pathlib import Path

import pytest

from gputop.codec import MAX_SNAPSHOT_BYTES
from gputop.model import Snapshot
from gputop.store import Recorder, RecordingError, open_recording
from gputop.store.numbers import RAW, Bases, pack, unpack
from gputop.store.rows import NUMBERS
from tests.ui import training_scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_numbers_come_back_as_they_went_in_to_the_bit() -> None:
    layout: list[int | float] = [7, 2.5, 0.1, 1e300, 5, 3.0, 12.0, 1.0, 0.0, 2**62]
    numbers: list[int | float] = [-(2**62), 2.75, 1 / 3, -1e-300, 5.0, -0.0, 1e20, 123456.789012, 5e-324, 2**62 + 1]
    back = unpack(pack(numbers, layout) or b"", layout)
    assert [(type(n), struct.pack("<d", n) if type(n) is float else n) for n in back] == [
        (type(n), struct.pack("<d", n) if type(n) is float else n) for n in numbers
    ]


def test_a_number_that_cannot_be_packed_leaves_the_row_to_be_written_otherwise() -> None:
    assert pack([math.nan], [1.0]) is None
    assert pack([math.inf], [1.0]) is None
    assert pack([2**64], [0]) is None  # beyond 8 bytes of difference


def test_rows_read_against_one_layout_through_its_cache_come_back_as_read_alone() -> None:
    layout: list[int | float] = [7, 2.5, 0.1, 1e300, 5, 3.0, 12.0, 1.0, 0.0, 2**62]
    rows: list[list[int | float]] = [
        [8, 2.5, 0.2, 1e300, 6, 3.0, 12.5, 1.0, 0.0, 2**62],
        [9, 2.75, 0.25, -1e-300, 5, -0.0, 12.0, 1.5, 5e-324, 1],  # numbers of other kinds in some places
        [8, 2.5, 0.2, 1e300, 6, 3.0, 12.5, 1.0, 0.0, 2**62],  # the kinds of two rows before
        [-(2**62), 1 / 3, 0.1, 2.0, 5, 3.25, 1e20, 123456.789012, 0.0, 3],
    ]
    cache = Bases()
    for numbers in rows:
        data = pack(numbers, layout) or b""
        through, alone = unpack(data, layout, cache), unpack(data, layout)
        assert [(type(n), struct.pack("<d", n) if type(n) is float else n) for n in through] == [
            (type(n), struct.pack("<d", n) if type(n) is float else n) for n in alone
        ]
        assert [(type(n), struct.pack("<d", n) if type(n) is float else n) for n in alone] == [
            (type(n), struct.pack("<d", n) if type(n) is float else n) for n in numbers
        ]


@pytest.mark.parametrize(
    "data",
    [
        b"",  # no tags
        bytes([0]),  # a tag and no number
        bytes([0, 0]) + b"\x01",  # two tags for a layout of one number
        bytes([RAW + 1]) + b"\x01",  # not a tag
        bytes([0]) + b"\x01\x02",  # a byte after the number
        bytes([3]) + b"\x01",  # an 8-byte difference cut short
    ],
)
def test_packed_numbers_that_are_not_are_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        unpack(data, [1])


def steady(n: int) -> list[Snapshot]:
    """``n`` snapshots of the starved job, numbers changing at every one, nothing coming or going."""
    return [training_scenes.starved_job(1_800_000_000.0 + i) for i in range(n)]


def recorded(path: Path, snaps: list[Snapshot]) -> list[bytes]:
    with Recorder(path, 1.0, hostname="h") as recorder:
        for snap in snaps:
            recorder.append(snap)
    db = sqlite3.connect(path)
    rows = [bytes(data) for (data,) in db.execute("SELECT data FROM snapshots ORDER BY rowid")]
    db.close()
    return rows


def test_rows_that_change_as_the_first_did_hold_their_numbers_and_read_back_in_any_order(tmp_path: Path) -> None:
    snaps = steady(12)
    rows = recorded(tmp_path / "v5.gputop", snaps)
    assert [row[:1] for row in rows].count(NUMBERS) >= 8  # a row whose other fields changed too is a delta
    with open_recording(tmp_path / "v5.gputop") as recording:
        assert list(recording) == snaps  # every snapshot kept while the later ones are read
        for k in (9, 3, 11, 2, 0, 7):
            assert recording.read(k + 1) == snaps[k]


def test_a_row_whose_fields_are_not_the_first_rows_is_written_as_its_changes(tmp_path: Path) -> None:
    snaps = steady(6)
    rows = recorded(tmp_path / "before.gputop", snaps)
    assert rows[3][:1] == NUMBERS
    snaps[3] = dataclasses.replace(snaps[3], processes=snaps[3].processes[:-1])  # a process row gone
    rows = recorded(tmp_path / "v5.gputop", snaps)
    assert rows[3][:1] == b"D"
    with open_recording(tmp_path / "v5.gputop") as recording:
        assert list(recording) == snaps


def test_hostile_number_rows_are_skipped_one_by_one(tmp_path: Path) -> None:
    """A row of numbers with the wrong count of them, a distance of 1 (the first delta is never one), a zlib bomb
    or no first delta to lay it out is a row that cannot be read: skipped and counted, the rows around it read."""
    snaps = steady(10)
    path = tmp_path / "v5.gputop"
    rows = recorded(path, snaps)
    bomb = zlib.compress(b"\0" * (MAX_SNAPSHOT_BYTES + 10), 9)
    db = sqlite3.connect(path)
    db.executemany(
        "UPDATE snapshots SET data = ? WHERE rowid = ?",
        [
            (NUMBERS + bytes([3]) + zlib.compress(b"\0\0\0"), 4),  # three numbers, not the layout's count
            (NUMBERS + bytes([1]) + rows[5][2:], 6),  # a distance of 1
            (NUMBERS + bytes([6]) + bomb, 7),
        ],
    )
    db.commit()
    db.close()
    with open_recording(path) as recording:
        assert list(recording) == [snaps[i] for i in (0, 1, 2, 4, 7, 8, 9)]
        assert recording.skipped == 3
        for rowid in (4, 6, 7):
            with pytest.raises(RecordingError, match=f"snapshot row {rowid} does not decode"):
                recording.read(rowid)
        assert recording.read(9) == snaps[8]
