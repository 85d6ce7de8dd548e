"""The pure parts of ``gputop run``'s stages: the job's end in words, an output checked before the job starts,
and the snapshot the dashboard keeps once the job has ended."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gputop.advisor import Advisor
from gputop.files import check_replaceable
from gputop.model import (
    EVIDENCE_RANK,
    EVIDENCE_WORKERS,
    PROCESS_EXITED,
    ROLE_TORCHRUN_AGENT,
    DriverInfo,
    HostProcess,
    Snapshot,
    TrainingView,
)
from gputop.run.console import Console
from gputop.run.end import JobEnd
from gputop.run.watch import Watcher
from tests.factories import host_info

pytestmark = pytest.mark.fast

AGENT, RANK = 4100, 4101


def test_a_job_that_exits_is_told_by_its_exit_status() -> None:
    assert JobEnd(4242, 3, 0.0, 85.0).how() == "exit status 3"
    assert JobEnd(4242, 3, 0.0, 85.0).exit_code == 3


def test_a_job_killed_by_a_signal_is_told_by_the_signals_name_and_exits_as_a_shell_says() -> None:
    end = JobEnd(4242, -signal.SIGINT, 0.0, 85.0)
    assert end.how() == "killed by SIGINT"
    assert end.exit_code == 130


def test_a_signal_without_a_name_is_told_by_its_number() -> None:
    assert JobEnd(4242, -(signal.SIGRTMIN + 3), 0.0, 1.0).how() == f"killed by signal {signal.SIGRTMIN + 3}"


def test_the_summary_says_when_the_job_ended_and_how_long_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert JobEnd(4242, 0, 3600 * 10 + 24 * 60 + 3, 85.4).summary() == "ended 10:24:03 after 1:25, exit status 0"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_report_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        check_replaceable(tmp_path)


def test_a_report_path_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_replaceable(tmp_path / "missing" / "report.json")


def test_a_report_path_below_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        check_replaceable(tmp_path / "file" / "report.json")


def test_a_writable_report_path_passes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("the last run's")
    check_replaceable(tmp_path / "report.json")
    check_replaceable(tmp_path / "new.json")
    assert os.listdir(tmp_path) == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "the last run's"


# -- the view the dashboard keeps --------------------------------------------------------------------------------


def snap(t: float, agent: str = "running", ranks: int = 2, rank_evidence: bool = True) -> Snapshot:
    """A torchrun agent (``agent``: running, zombie or gone) with ``ranks`` ranks below it."""
    rank_pids = tuple(range(RANK, RANK + ranks))
    hosts = [HostProcess(pid, status="sleeping") for pid in rank_pids]
    if agent == "gone":
        hosts.append(HostProcess(AGENT, unavailable={"status": PROCESS_EXITED}))
    else:
        hosts.append(HostProcess(AGENT, status=agent))
    evidence = (EVIDENCE_RANK, EVIDENCE_WORKERS) if rank_evidence else ()
    views = [TrainingView(AGENT, role=ROLE_TORCHRUN_AGENT, ranks=rank_pids)]
    views += [TrainingView(pid, evidence=evidence) for pid in rank_pids]
    return Snapshot(t, host_info("node"), DriverInfo("ok"), host_processes=tuple(hosts), training=tuple(views))


def watcher_over(*snapshots: Snapshot) -> Watcher:
    job = SimpleNamespace(pid=AGENT, end=None)
    console = Console(lambda _: None, lambda _: None, lambda _, status: status)
    watcher = Watcher(job, Advisor(AGENT), console, None)  # type: ignore[arg-type]
    for each in snapshots:
        watcher.take(each)
    return watcher


def test_the_view_kept_is_the_last_taken_while_the_job_ran() -> None:
    running = [snap(t) for t in range(5)]
    assert watcher_over(*running, snap(5, agent="zombie"), snap(6, agent="gone")).last_view is running[-1]


def test_an_agent_that_outlives_its_ranks_keeps_the_view_with_the_ranks() -> None:
    with_ranks = snap(3)
    alone = [snap(t, ranks=0) for t in range(4, 20)]
    assert watcher_over(snap(2), with_ranks, *alone).last_view is with_ranks


def test_a_job_that_never_showed_training_evidence_keeps_its_last_running_view() -> None:
    last = snap(3, rank_evidence=False)
    assert watcher_over(snap(2, rank_evidence=False), last, snap(4, agent="zombie")).last_view is last


def test_snapshots_taken_after_the_end_are_neither_recorded_nor_advised() -> None:
    recorded: list[Snapshot] = []
    job = SimpleNamespace(pid=AGENT, end=JobEnd(AGENT, 0, at=10.0, ran_s=10.0))
    console = Console(lambda _: None, lambda _: None, lambda _, status: status)
    watcher = Watcher(job, Advisor(AGENT), console, recorded.append)  # type: ignore[arg-type]
    before, after = snap(9.5), snap(10.5, agent="gone")
    watcher.take(before)
    watcher.take(after)
    assert recorded == [before]
    assert watcher.last_view is before
