"""Parsing /proc/PID/stat."""

from __future__ import annotations

import os

import psutil
import pytest

from gputop.collect.procstat import PAGE_SIZE, parse_stat, read_stat

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

# A real line, with a process name that holds a space and a closing parenthesis.
LINE = (
    "4242 (pt data) x) S 4100 4242 4100 0 -1 4194560 1200 0 0 0 350 25 0 0 20 0 9 0 123456 "
    "2147483648 51200 18446744073709551615 1 1 0 0 0 0 0 16781312 17442 0 0 0 17 1 0 0 0 0 0\n"
)


def test_name_may_hold_spaces_and_parentheses():
    assert parse_stat(LINE).name == "pt data) x"


def test_fields_come_in_plain_units():
    stat = parse_stat(LINE)

    assert (stat.status, stat.ppid, stat.num_threads, stat.start_ticks) == ("sleeping", 4100, 9, 123456)
    assert stat.cpu_ticks == 350 + 25
    assert stat.rss_bytes == 51200 * PAGE_SIZE


def test_reading_this_process_agrees_with_psutil():
    me = psutil.Process()

    stat = read_stat(os.getpid())

    assert stat.ppid == me.ppid()
    assert stat.name == me.name()
    assert stat.num_threads == me.num_threads()
