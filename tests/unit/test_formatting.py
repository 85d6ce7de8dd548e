"""Value formatting shared by every view: sizes, shares, lengths of time and clock times."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputop.formatting import (
    NA,
    counted,
    fmt_age,
    fmt_bytes,
    fmt_clock,
    fmt_duration,
    fmt_length,
    fmt_number,
    fmt_percent,
    fmt_span,
    short_command,
)

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job


def test_fmt_bytes_picks_binary_units():
    assert [fmt_bytes(v) for v in (0, 512, 1536, 80 * 1024**3, 123 * 1024**2)] == [
        "0B",
        "512B",
        "1.50KiB",
        "80.0GiB",
        "123MiB",
    ]
    assert fmt_bytes(None) == NA == "N/A"


@given(st.integers(min_value=0, max_value=2**64))
def test_fmt_bytes_is_short_for_any_size(n):
    assert len(fmt_bytes(n)) <= 10


def test_fmt_percent_and_number_round_and_mark_missing():
    assert (fmt_percent(87.4), fmt_percent(None), fmt_percent(0.0)) == ("87%", "N/A", "0%")
    assert (fmt_number(61.6, "C"), fmt_number(None, "W"), fmt_number(2.345, "", 2)) == ("62C", "N/A", "2.35")


def test_fmt_span_writes_a_length_to_the_second():
    assert [fmt_span(s) for s in (0, 45, 60, 725, 3723, 90061, -3)] == [
        "0s",
        "45s",
        "1m00s",
        "12m05s",
        "1h02m03s",
        "25h01m01s",
        "0s",
    ]
    assert fmt_span(59.9999999) == "1m00s"  # a float a hair under a whole second counts as it


def test_fmt_length_is_shorter_from_an_hour_up_and_rounds():
    assert [fmt_length(s) for s in (45, 725, 3600, 3599.6, 5430, 44.4)] == [
        "45s",
        "12m05s",
        "1h00m",
        "1h00m",
        "1h30m",
        "44s",
    ]


def test_fmt_duration_reads_like_ps():
    assert [fmt_duration(s) for s in (5, 65, 3725, 90061, -1)] == ["5s", "1:05", "1:02:05", "1-01:01:01", "0s"]
    assert fmt_duration(None) == NA


def test_fmt_age_keeps_the_unit_that_matters():
    assert [fmt_age(s) for s in (0.4, 59, 61, 7200, 200000, -5)] == ["0s", "59s", "1m", "2h", "2d", "0s"]


def test_fmt_clock_is_local_time_with_the_date_or_hundredths_when_asked(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        at = 1_795_270_087.25  # 2026-11-21 14:08:07.25 UTC
        assert fmt_clock(at) == "14:08:07"
        assert fmt_clock(at, with_date=True) == "2026-11-21 14:08:07"
        assert fmt_clock(at, hundredths=True) == "14:08:07.25"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_counted_says_one_thing_in_the_singular():
    assert [counted(n, "thread") for n in (0, 1, 2, 13408)] == ["0 threads", "1 thread", "2 threads", "13,408 threads"]
    assert counted(1, "batch", "batches") == "1 batch"
    assert counted(3, "batch", "batches") == "3 batches"
    assert counted(None, "thread") == "N/A threads"


def test_a_short_command_names_its_program_by_the_base_name_and_keeps_every_argument():
    venv = "/home/alice/project/.venv/bin/python train.py --config configs/llama3-8b.yaml"
    assert short_command(venv) == "python train.py --config configs/llama3-8b.yaml"
    assert short_command("/usr/lib/xorg/Xorg vt7 -displayfd 3") == "Xorg vt7 -displayfd 3"
    assert short_command("./run.sh /data/x") == "run.sh /data/x"


def test_a_short_command_names_a_python_script_by_its_base_name():
    assert short_command("python3 /work/jobs/memjob.py cnn 128") == "python3 memjob.py cnn 128"
    assert short_command("/opt/venv/bin/python3.11 -u -W ignore /srv/train.py --lr 3") == (
        "python3.11 -u -W ignore train.py --lr 3"
    )
    assert short_command("python3 -m gputop.demo.job /data/x.py") == "python3 -m gputop.demo.job /data/x.py"
    assert short_command("python3 -c print(1) /data/x.py") == "python3 -c print(1) /data/x.py"
    assert short_command("/usr/bin/bash /srv/run.py") == "bash /srv/run.py"  # not an interpreter of .py files


def test_a_short_command_leaves_a_bare_program_and_a_kernel_thread_as_they_are():
    assert short_command("python -m torch.distributed.run train.py") == "python -m torch.distributed.run train.py"
    assert short_command("[kworker/0:1-events]") == "[kworker/0:1-events]"
    assert short_command("/usr/bin/") == "/usr/bin/"
