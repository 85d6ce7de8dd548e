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


def node(first_rank: int, hostname: str, offset: int = 0, world: int = 16):
    return host_scenes.ranked(scenes.training_node(), first_rank, world, hostname, pid_offset=offset)


def test_the_ranks_of_one_run_on_two_hosts_are_one_job_of_sixteen():
    a, b = node(0, "gpu-node-07"), node(8, "gpu-node-10", offset=1000)

    (job,) = jobs_across([("gpu-node-07", a), ("gpu-node-10", b), ("down", None)])

    assert [r.rank for r in job.ranks] == list(range(16))
    assert job.hosts == ("gpu-node-07", "gpu-node-10")
    (line,) = [line.plain for line in job_lines([job], 200, PLAIN)]
    assert line.startswith(
        f"JOB {job.id}  torchrun  user alice  16 ranks on gpu-node-07 (8), gpu-node-10 (8)   steps/s 3.1"
    )
    assert line.endswith("data wait 2–38%")  # rank 13 waits on a slow shard


def test_a_host_not_seen_leaves_the_job_short_of_its_world_size():
    (job,) = jobs_across([("gpu-node-07", node(0, "gpu-node-07"))])

    assert "8 of 16 ranks on gpu-node-07 (8)" in job_lines([job], 200, PLAIN)[0].plain


def test_hosts_without_jobs_of_several_ranks_have_no_job_lines():
    assert jobs_across([("gpu-node-07", scenes.training_node())]) == ()
    assert job_lines([], 100, PLAIN) == []


def test_a_host_that_claims_ranks_another_host_holds_is_not_added_to_the_job():
    a, b = node(0, "gpu-node-07"), node(8, "gpu-node-10", offset=1000)
    hostile = node(8, "intruder", offset=2000)  # the same run, user and rank numbers as gpu-node-10's

    real, apart = jobs_across([("gpu-node-07", a), ("gpu-node-10", b), ("intruder", hostile)])

    assert real.hosts == ("gpu-node-07", "gpu-node-10") and len(real.ranks) == 16
    assert apart.hosts == ("intruder",) and apart.id != real.id
    assert "16 ranks on gpu-node-07 (8), gpu-node-10 (8)" in job_lines([real], 200, PLAIN)[0].plain


def test_a_host_whose_ranks_name_another_world_size_is_not_added_to_the_job():
    a, hostile = node(0, "gpu-node-07"), node(8, "intruder", offset=1000, world=24)

    real, apart = jobs_across([("gpu-node-07", a), ("intruder", hostile)])

    assert (real.hosts, real.world_size) == (("gpu-node-07",), 16)
    assert (apart.hosts, apart.world_size) == (("intruder",), 24)
