"""The replay's times: the forms a jump accepts, speeds, how positions are written, and the strip's columns."""

from __future__ import annotations

import datetime as dt

import pytest

from gputop.ui.replay.time import (
    column_of,
    column_time,
    fmt_speed,
    next_speed,
    parse_speed,
    resolve_time,
    strip_marks,
)

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

START = dt.datetime(2025, 11, 23, 23, 30, 0, tzinfo=dt.timezone.utc).timestamp()
"""Half an hour before midnight (UTC: the fixture in conftest sets TZ)."""
END = START + 3600
NOW = START + 600


def at(text: str) -> float:
    return resolve_time(text, start=START, end=END, current=NOW) - START


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("23:45", 900),
        ("23:45:30", 930),
        ("00:10", 2400),  # past midnight: the next day the recording reaches
        ("23:30:00", 0),
        ("23:30", 0),
        (" +90s ", 690),
        ("+5m", 900),
        ("-1m30s", 510),
        ("+1h", 3600),  # stops at the end
        ("-1h", 0),  # and at the start
        ("+2", 602),
        ("1h", 3600),
        ("12m05s", 725),
        ("90", 90),
        ("1.5s", 1.5),
        ("0H12M05S", 725),
    ],
)
def test_the_forms_a_jump_accepts(text: str, seconds: float) -> None:
    assert at(text) == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no time given"),
        ("soon", "not a time: 'soon'"),
        ("+soon", "not an offset: '+soon'"),
        ("1h02", "not a time: '1h02'"),
        ("24:00", "not a time of day"),
        ("12:61", "not a time of day"),
        ("23:29", "23:29 is not in the recording (2025-11-23 23:30:00 to 2025-11-24 00:30:00)"),
        ("01:00", "is not in the recording"),
        ("1h00m01s", "1h00m01s is past the end: the recording is 1h00m long"),
    ],
)
def test_bad_jumps_say_why_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        at(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_speeds() -> None:
    assert [parse_speed(t) for t in ("4", "x4", "×4", "4x", "0.25", "0.01", "1e2")] == [4, 4, 4, 4, 0.25, 0.01, 100]
    for bad in ("fast", "0", "-1", "nan", "inf", "2000", "1e-9", "0.009", "1e-300", "1_0", "٤", " "):
        with pytest.raises(ValueError):
            parse_speed(bad)
    assert next_speed(1, faster=True) == 2 and next_speed(16, faster=True) == 64 and next_speed(64, True) == 64
    assert next_speed(1, faster=False) == 0.5 and next_speed(0.25, faster=False) == 0.25
    assert next_speed(3, faster=True) == 4 and next_speed(3, faster=False) == 2  # from an odd --speed
    assert next_speed(100, faster=True) == 100 and next_speed(100, faster=False) == 64
    assert fmt_speed(4) == "×4" and fmt_speed(0.25) == "×0.25"


def test_strip_columns_show_the_worst_finding_and_leave_gaps_blank() -> None:
    times = [0.0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 102, 103]  # the recorder stopped between 7 and 100
    marks = [-1, -1, 0, 1, -1, -1, 2, -1, -1, -1, -1, -1]
    columns = strip_marks(times, marks, 103, max_gap_s=5)
    assert columns[:8] == [-1, -1, 0, 1, -1, -1, 2, -1]
    assert columns[8:100] == [None] * 92
    assert columns[100:] == [-1, -1, -1]
    narrow = strip_marks(times, marks, 4, max_gap_s=5)
    assert narrow == [2, None, None, -1]  # a column shows the worst of its snapshots
    assert strip_marks(times, None, 4, max_gap_s=5) == [-1, None, None, -1]  # not computed yet
    assert strip_marks(times, marks, 0) == [] and strip_marks([], None, 3) == [None, None, None]


def test_columns_and_their_times_agree() -> None:
    for column in range(80):
        assert column_of(column_time(column + 0.5, 10.0, 500.0, 80), 10.0, 500.0, 80) == column
    assert column_of(510.0, 10.0, 500.0, 80) == 79
    assert column_of(10.0, 10.0, 0.0, 80) == 0
