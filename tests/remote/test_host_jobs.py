"""The multi-host view's job lines: the ranks of one torchrun run on several hosts are one job, named by the
launcher's identity, with how many ranks each host holds and how many the run has."""

from __future__ import annotations

import pytest

from gputop.ui.text.gpu import Palette
from gputop.ui.text.hosts import job_lines, jobs_across
from tests.remote import host_scenes
from tests.ui import scenes

pytestmark = pytest.mark.fast

PLAIN = Palette()


def node(first_rank: int, hostname: str, offset: int = 0):
    return host_scenes.ranked(scenes.training_node(), first_rank, 16, hostname, pid_offset=offset)


def test_the_ranks_of_one_run_on_two_hosts_are_one_job_of_sixteen():
    a, b = node(0, "gpu-node-07"), node(8, "gpu-node-10", offset=1000)

    (job,) = jobs_across([("gpu-node-07", a), ("gpu-node-10", b), ("down", None)])

    assert [r.rank for r in job.ranks] == list(range(16))
    assert job.hosts == ("gpu-node-07", "gpu-node-10")
    (line,) = [line.plain for line in job_lines([job], 200, PLAIN)]
    assert line.startswith(f"JOB {job.id}  torchrun  16 ranks on gpu-node-07 (8), gpu-node-10 (8)   steps/s 3.1")
    assert line.endswith("data wait 2–38%")  # rank 13 waits on a slow shard


def test_a_host_not_seen_leaves_the_job_short_of_its_world_size():
    (job,) = jobs_across([("gpu-node-07", node(0, "gpu-node-07"))])

    assert "8 of 16 ranks on gpu-node-07 (8)" in job_lines([job], 200, PLAIN)[0].plain


def test_hosts_without_jobs_of_several_ranks_have_no_job_lines():
    assert jobs_across([("gpu-node-07", scenes.training_node())]) == ()
    assert job_lines([], 100, PLAIN) == []
