"""``gputop report``'s argument check: it says how long to watch and leaves the parsed arguments as they were."""

from __future__ import annotations

import os
from argparse import Namespace

import pytest

from gputop import cli
from gputop.advisor.engine import Advisor
from gputop.advisor.process_use import UseTally
from gputop.cli import report
from gputop.cli.args import REPORT_SECONDS, UsageError


def parsed(*argv: str) -> Namespace:
    return cli.build_parser().parse_args(["report", *argv])


@pytest.mark.parametrize(
    ("argv", "watch_s"),
    [
        (("--pid", "1"), REPORT_SECONDS),
        (("--pid", "1", "--seconds", "90"), 90.0),
        (("job.gputop",), None),
        (("job.gputop", "--pid", "1"), None),
    ],
)
def test_the_check_returns_how_long_to_watch_and_changes_no_argument(argv: tuple[str, ...], watch_s: float | None):
    args = parsed(*argv)
    before = vars(args).copy()

    returned = report.watch_seconds(args)

    assert vars(args) == before
    assert returned == watch_s


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("job.gputop", "--seconds", "30"), "--seconds is for watching a live job"),
        (("--seconds", "30"), "gputop report needs --pid PID"),
    ],
)
def test_a_bad_mix_is_a_usage_error_that_changes_no_argument(argv: tuple[str, ...], says: str):
    args = parsed(*argv)
    before = vars(args).copy()

    with pytest.raises(UsageError, match=says):
        report.watch_seconds(args)
    assert vars(args) == before


def test_a_live_report_without_seconds_watches_for_the_default(monkeypatch: pytest.MonkeyPatch, capsys):
    watched: list[float] = []

    def fake_watch(pid: int, seconds: float, config: object, interval_s: float | None = None) -> report.Watch:
        watched.append(seconds)
        return report.Watch(Advisor(), snapshots=0, watched_s=0.0, ended=True, use=UseTally(pid).result())

    monkeypatch.setattr(report, "watch", fake_watch)

    assert cli.main(["report", "--pid", str(os.getpid())]) == 0
    assert watched == [REPORT_SECONDS] == [60.0]
    assert f"PID {os.getpid()}: watched 0 s" in capsys.readouterr().out
