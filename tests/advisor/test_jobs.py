"""The job rules with plain model values: each fires in the window it is about, naming the rank or node with the
number it computes, and stays silent where the job is healthy; and the engine's grouping: training advice only
for processes with training evidence, a GPU's finding once per GPU, a finding on every rank once per job."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.rules import node_cpu_oversubscribed, rank_imbalance, straggler
from gputop.jobs import JOB_TORCHRUN, Job, JobRank, find_jobs
from gputop.model import HostProcess, Launch, Snapshot
from tests.advisor.build import gpu, host, loader, row, sample, snapshot, step, view, window, workers

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

CONFIG = AdvisorConfig(window_s=10.0)
FIRST = 7000


def job_of(*ranks: dict, cores: int = 8, host_name: str | None = None, steps: dict | None = None):
    """A torchrun job with one rank per dict (``wait``, ``busy``, ``cpu``, ``steps``, ``workers``,
    ``worker_status``, ``batch``, ``host``, ``host_cpu``), and each rank's window; ``steps`` gives ranks their
    probe's step anatomy, by rank."""
    members = []
    windows = {}
    for n, figures in enumerate(ranks):
        pid = FIRST + n
        training = view(
            loader(
                wait=figures.get("wait", 0.02),
                steps=figures.get("steps", 5.0),
                batch=figures.get("batch", 32),
                workers=figures.get("workers", 2),
            ),
            workers(figures.get("workers", 2), status=figures.get("worker_status", "sleeping"), first=9000 + 10 * n),
            main_busy=figures.get("busy", 0.6),
            main_cpu=figures.get("cpu"),
            pid=pid,
            anatomy=(steps or {}).get(n),
        )
        training = dataclasses.replace(training, launch=Launch(rank=n, local_rank=n, world_size=len(ranks)))
        machine = host(cpu_percent=figures.get("host_cpu", 50.0), cores=cores)
        gpus = (dataclasses.replace(gpu(), index=n),)
        windows[pid] = window(lambda t, v=training, m=machine, g=gpus: sample(t, v, gpus=g, machine=m))
        members.append(JobRank(training, n, n, figures.get("host", host_name)))
    return Job("j0b", JOB_TORCHRUN, tuple(members), len(ranks)), windows


# -- straggler ------------------------------------------------------------------------------------------------------


def test_a_rank_whose_own_work_is_longer_while_the_others_wait_is_the_straggler():
    # Every rank takes 200 ms a step (5 steps/s). Rank 2 computes 90% of it; the others 50% and wait for it.
    job, windows = job_of({"busy": 0.5}, {"busy": 0.5}, {"busy": 0.9}, {"busy": 0.5}, host_name="node-b")

    found = straggler(job, windows, CONFIG)

    assert found.pid == FIRST + 2 and found.finding.evidence["host"] == "node-b"
    assert found.finding.title == "Straggler: rank 2 holds the other 3 back"
    assert found.finding.evidence["own_step_s"] == pytest.approx(0.18)
    assert found.finding.evidence["others_own_step_s"] == pytest.approx(0.1)
    assert "rank 2 (PID 7002 on node-b, GPU 2)" in found.finding.detail
    assert "main thread is on the CPU 90% of the time, the others' 50%" in found.finding.action


def test_the_straggler_names_its_different_batch_size():
    job, windows = job_of({"busy": 0.5}, {"busy": 0.95, "batch": 48})
    assert "its batch_size is 48, the others' 32" in straggler(job, windows, CONFIG).finding.action


def test_a_rank_slow_for_want_of_data_is_no_straggler():
    # Rank 1 waits for its data 50% of each step and computes little: the others wait for it, but it is its
    # input, which rank-imbalance names.
    assert straggler(*job_of({"busy": 0.3, "wait": 0.02}, {"busy": 0.3, "wait": 0.5}), CONFIG) is None


def test_a_little_more_compute_in_a_step_that_mostly_waits_is_no_straggler():
    # 6% against 4% busy is 50% more compute, but 2% of a step: not what a 90% wait of the others is made of.
    job, windows = job_of({"busy": 0.04, "wait": 0.02}, {"busy": 0.06, "wait": 0.9})
    assert straggler(job, windows, CONFIG) is None


def test_no_straggler_in_a_balanced_job_or_when_nobody_waits():
    assert straggler(*job_of({"busy": 0.6}, {"busy": 0.62}, {"busy": 0.58}), CONFIG) is None
    # Rank 1 does more, but the others are not waiting for it (they are busy too): not holding anyone back.
    assert straggler(*job_of({"busy": 0.95}, {"busy": 0.97, "steps": 3.0}), CONFIG) is None


# -- straggler from the step -----------------------------------------------------------------------------------------

# A rank's step as the probe reports it: 20 ms forward, 30 ms backward, 5 ms optimizer and other, its wait for the
# others in collectives; ``extra`` seconds more in one phase for the slow rank.
BALANCED = {"data": 0.002, "forward": 0.02, "backward": 0.03, "optimizer": 0.005, "other": 0.005}


def rank_step(collective: float, **extra: float):
    phases = {p: BALANCED[p] + extra.get(p, 0.0) for p in BALANCED}
    return step(clock="host", collective=collective, **phases)


def test_the_rank_the_others_wait_for_in_collectives_is_the_straggler_named_with_its_phase():
    # Rank 1 sleeps 60 ms in its forward pass: off the CPU like the others, who wait those 60 ms in the all-reduce.
    steps = {0: rank_step(0.065), 1: rank_step(0.005, forward=0.06)}
    job, windows = job_of({"busy": 0.1}, {"busy": 0.1}, host_name="node-b", steps=steps)

    found = straggler(job, windows, CONFIG)

    assert found.pid == FIRST + 1
    assert found.finding.title == "Straggler: rank 1 holds the other 1 back"
    assert "rank 1 (PID 7001 on node-b, GPU 1) spends 80 ms of each step in forward, the others' median 20 ms" in (
        found.finding.detail
    )
    assert found.finding.evidence["phase"] == "forward" and found.finding.evidence["measured_by"] == "step"
    assert found.finding.evidence["others_wait_share"] == pytest.approx(0.51, abs=0.01)
    assert "its forward pass on rank 1" in found.finding.action


def test_a_rank_that_waits_for_a_cpu_its_host_shares_with_the_others_is_no_straggler():
    # Both ranks on one host whose cores are all taken: rank 1 is 20 ms late each step only because it waited
    # 17 ms more for a CPU (on a CPU or runnable 30 % of the time, on one 10 %). The scheduler spreads that wait
    # over the ranks as it pleases; nothing of rank 1's own makes it slower.
    steps = {0: rank_step(0.025), 1: rank_step(0.005, other=0.02)}
    ranks = {"busy": 0.1, "cpu": 10, "host_cpu": 97}, {"busy": 0.3, "cpu": 10, "host_cpu": 97}
    assert straggler(*job_of(*ranks, steps=steps), CONFIG) is None
    # By the CPU too: rank 1 on a CPU or runnable 90 % of its step, on one 50 %, like the others.
    ranks = {"busy": 0.5, "cpu": 50, "host_cpu": 97}, {"busy": 0.9, "cpu": 50, "host_cpu": 97}
    assert straggler(*job_of(*ranks), CONFIG) is None


def test_a_rank_that_waits_for_a_cpu_where_the_host_has_cores_free_is_the_straggler():
    # The same with cores free (the host 60 % busy): rank 1 waits for the busy cores its affinity holds it to.
    steps = {0: rank_step(0.025), 1: rank_step(0.005, other=0.02)}
    ranks = {"busy": 0.1, "cpu": 10, "host_cpu": 60}, {"busy": 0.3, "cpu": 10, "host_cpu": 60}

    found = straggler(*job_of(*ranks, steps=steps), CONFIG)

    assert found.pid == FIRST + 1
    assert "it waits for a CPU 17 ms of each step, the others 0 ms" in found.finding.action


def test_a_rank_that_waits_for_a_cpu_on_its_own_host_is_the_straggler_and_says_so():
    # The same on two hosts: rank 1's host holds its cores, and the whole job waits for it.
    steps = {0: rank_step(0.025), 1: rank_step(0.005, other=0.02)}
    ranks = {"busy": 0.1, "cpu": 10, "host": "node-a"}, {"busy": 0.3, "cpu": 10, "host": "node-b"}

    found = straggler(*job_of(*ranks, steps=steps), CONFIG)

    assert found.pid == FIRST + 1
    assert "it waits for a CPU 17 ms of each step (on node-b), the others 0 ms" in found.finding.action


def test_a_rank_waiting_for_its_data_is_no_straggler_by_the_step_either():
    # The others wait for rank 1 in the all-reduce, but for its input: rank-imbalance names that.
    steps = {0: rank_step(0.065), 1: rank_step(0.005, data=0.06)}
    assert straggler(*job_of({"busy": 0.1}, {"busy": 0.1}, steps=steps), CONFIG) is None


def test_ranks_that_all_wait_in_collectives_alike_have_no_straggler():
    # A slow network: every rank waits as long in the all-reduce, and none works longer.
    steps = {0: rank_step(0.06), 1: rank_step(0.065, backward=0.002), 2: rank_step(0.062)}
    assert straggler(*job_of({"busy": 0.4}, {"busy": 0.4}, {"busy": 0.4}, steps=steps), CONFIG) is None


def test_the_step_decides_over_the_cpu_where_every_rank_reports_it():
    # Rank 1's main thread is busier (it logs), but the step shows nobody waiting for it.
    steps = {0: rank_step(0.004), 1: rank_step(0.004)}
    assert straggler(*job_of({"busy": 0.5}, {"busy": 0.95}, steps=steps), CONFIG) is None


# -- rank-imbalance -------------------------------------------------------------------------------------------------


def test_one_rank_waiting_for_data_far_longer_is_an_imbalance():
    job, windows = job_of({"wait": 0.04}, {"wait": 0.05}, {"wait": 0.45}, {"wait": 0.04})

    found = rank_imbalance(job, windows, CONFIG)

    assert (found.pid, found.pids) == (FIRST + 2, (FIRST + 2,))
    assert found.finding.title == "Ranks wait for data unevenly: 4% to 45% of each step"
    assert found.finding.evidence["slow_ranks"] == (2,)


def test_ranks_that_wait_alike_are_no_imbalance():
    assert rank_imbalance(*job_of({"wait": 0.05}, {"wait": 0.07}, {"wait": 0.06}), CONFIG) is None
    assert rank_imbalance(*job_of({"wait": 0.55}, {"wait": 0.65}, {"wait": 0.72}), CONFIG) is None  # all starved


# -- node-cpu-oversubscribed ----------------------------------------------------------------------------------------


def test_ranks_times_workers_beyond_the_cores_of_a_busy_node_share_the_cores_out():
    ranks = [{"workers": 4, "worker_status": "running"}] * 4  # 16 workers that want a CPU, and 4 ranks, on 8
    found = node_cpu_oversubscribed(*job_of(*ranks, cores=8), CONFIG)

    assert found.finding.suggest == {"num_workers": 1}  # 8 cores ÷ 4 ranks, less one for each main process
    assert found.finding.title == "4 ranks and 16 DataLoader workers share 8 cores"
    assert found.pids == tuple(FIRST + n for n in range(4))


def test_a_rank_whose_workers_are_gone_from_its_latest_sample_still_counts_them():
    # A rank that ends its loop first shuts its workers down, while the finding still holds: its latest sample has
    # neither its loader nor its workers, the rest of its window has both.
    ranks = [{"workers": 4, "worker_status": "running"}] * 4
    job, windows = job_of(*ranks, cores=8)
    late = windows[FIRST + 1]
    last = late.samples[-1]
    ended = dataclasses.replace(last, loader=None, view=dataclasses.replace(last.view, workers=()))
    windows[FIRST + 1] = dataclasses.replace(late, samples=(*late.samples[:-1], ended))

    found = node_cpu_oversubscribed(job, windows, CONFIG)

    assert found.finding.title == "4 ranks and 16 DataLoader workers share 8 cores"


def test_a_node_with_cores_to_spare_or_idle_workers_is_not_oversubscribed():
    busy = {"workers": 2, "worker_status": "running"}
    assert node_cpu_oversubscribed(*job_of(busy, busy, cores=8), CONFIG) is None  # 6 processes on 8 cores
    waiting = {"workers": 4, "worker_status": "sleeping"}  # 16 workers waiting on a full queue cost nothing
    assert node_cpu_oversubscribed(*job_of(*[waiting] * 4, cores=8), CONFIG) is None


# -- jobs -----------------------------------------------------------------------------------------------------------


def ranks_snapshot(t: float, count: int, trains: bool = True, run_id: str = "run-7", **view_args) -> Snapshot:
    views = []
    for n in range(count):
        v = view(pid=FIRST + n, evidence=view().evidence if trains else (), **view_args)
        launch = Launch(rank=n, world_size=count, run_id=run_id, master_addr="10.0.0.1", master_port=29500)
        views.append(dataclasses.replace(v, launch=launch if trains else None))
    gpus = tuple(dataclasses.replace(gpu(busy=5.0, used_gib=10), index=n) for n in range(count))
    rows = tuple(dataclasses.replace(row(FIRST + n), gpu_index=n) for n in range(count))
    base = snapshot(t, views[0], gpus, rows)
    return dataclasses.replace(base, training=tuple(views))


def test_ranks_of_one_torchrun_run_are_one_job_with_the_same_id_on_every_host():
    here = find_jobs(ranks_snapshot(0.0, 2))
    there = find_jobs(ranks_snapshot(0.0, 2), host="node-b")

    assert [(j.kind, len(j.ranks)) for j in here] == [("torchrun", 2)]
    assert here[0].id == there[0].id
    assert find_jobs(ranks_snapshot(0.0, 2, run_id="run-8"))[0].id != here[0].id


def test_ranks_of_one_run_are_one_job_only_where_one_user_runs_them():
    snap = ranks_snapshot(0.0, 3)
    users = ("root", "root", "mallory")  # mallory copied RANK=2 and root's run id into her own process
    hosts = tuple(HostProcess(v.pid, 1, name="python3", user=user) for v, user in zip(snap.training, users))

    jobs = find_jobs(dataclasses.replace(snap, host_processes=hosts))

    assert [(j.user, j.pids) for j in jobs] == [("root", (FIRST, FIRST + 1)), ("mallory", (FIRST + 2,))]
    assert jobs[0].id != jobs[1].id


def test_plain_gpu_processes_make_no_job():
    assert find_jobs(ranks_snapshot(0.0, 3, trains=False)) == ()


# -- the engine: who gets what, once ------------------------------------------------------------------------------


def feed(advisor: Advisor, make, seconds: float = 25.0):
    t = 0.0
    while t <= seconds:
        advisor.update(make(t))
        t += 0.5
    return advisor.active


def test_plain_gpu_processes_get_the_gpus_findings_only_and_once_per_gpu():
    def make(t: float) -> Snapshot:
        snap = ranks_snapshot(t, 4, trains=False)
        rows = tuple(dataclasses.replace(r, gpu_index=0) for r in snap.processes)  # four holders on GPU 0
        idle = (dataclasses.replace(gpu(busy=0.0, used_gib=10), index=0),)
        return dataclasses.replace(snap, gpus=idle, processes=rows)

    active = feed(Advisor(config=AdvisorConfig(window_s=10.0, idle_s=10.0)), make)

    assert [a.id for a in active] == ["gpu-idle"]
    assert active[0].pids == tuple(FIRST + n for n in range(4))


def test_the_same_processes_as_training_ranks_get_training_advice_once_for_the_job():
    def make(t: float) -> Snapshot:
        return ranks_snapshot(t, 4, load=loader(wait=0.5, workers=2), worker_list=workers(2))

    active = feed(Advisor(config=CONFIG), make)

    starved = [a for a in active if a.id == "data-starved"]
    assert len(starved) == 1, [a.id for a in active]
    assert starved[0].pids == tuple(FIRST + n for n in range(4)) and starved[0].job is not None


def test_a_finding_on_some_ranks_only_stays_one_per_rank():
    def make(t: float) -> Snapshot:
        snap = ranks_snapshot(t, 2, load=loader(wait=0.01, workers=2), worker_list=workers(2))
        starving = dataclasses.replace(snap.training[1], probe=view(loader(wait=0.6, workers=2)).probe)
        return dataclasses.replace(snap, training=(snap.training[0], starving))

    starved = [a for a in feed(Advisor(config=CONFIG), make) if a.id == "data-starved"]

    assert [(a.pid, a.pids) for a in starved] == [(FIRST + 1, ())]


def test_processes_that_share_only_init_or_a_shell_are_not_one_job():
    snap = ranks_snapshot(0.0, 3, run_id="")
    views = tuple(dataclasses.replace(v, launch=None) for v in snap.training)  # no launcher: grouped by parent
    for parent in (HostProcess(1, 0, name="systemd"), HostProcess(500, 1, name="bash")):
        hosts = (*(HostProcess(v.pid, parent.pid, name="python3") for v in views), parent)
        jobs = find_jobs(dataclasses.replace(snap, training=views, host_processes=hosts))
        assert [j.kind for j in jobs] == ["single"] * 3, parent.name
    spawner = HostProcess(600, 500, name="python3")  # torch.multiprocessing.spawn's parent
    hosts = (*(HostProcess(v.pid, 600, name="python3") for v in views), spawner)
    (job,) = find_jobs(dataclasses.replace(snap, training=views, host_processes=hosts))
    assert (job.kind, len(job.ranks)) == ("processes", 3)


# -- the engine: the straggler named in time, and only where there is one -------------------------------------------

STEPS_FROM_S = 8.0
"""When the probe reports its first step anatomy: imports, the process group and the warm-up steps come first."""


def torchrun_snapshot(t: float, *ranks: dict) -> Snapshot:
    """Two or more ranks of one torchrun job at ``t``, each from a dict: ``busy`` (its main thread's CPU share),
    ``steps`` (steps per second), ``anatomy`` (its step, reported from ``STEPS_FROM_S``)."""
    snap = ranks_snapshot(t, len(ranks))
    views = []
    for n, figures in enumerate(ranks):
        anatomy = figures.get("anatomy") if t >= STEPS_FROM_S else None
        made = view(
            loader(wait=0.02, steps=figures.get("steps", 8.0)),
            workers(2, first=9000 + 10 * n),
            main_busy=figures.get("busy", 0.1),
            pid=FIRST + n,
            anatomy=anatomy,
        )
        views.append(dataclasses.replace(made, launch=snap.training[n].launch))
    return dataclasses.replace(snap, training=tuple(views))


def raised_at(*ranks: dict, seconds: float = 60.0) -> dict[str, tuple[float, int]]:
    """The rule ids raised over ``seconds`` of one-second ticks at the default window, each with when it was first
    raised and the PID it named."""
    advisor = Advisor()
    found: dict[str, tuple[float, int]] = {}
    t = 0.0
    while t <= seconds:
        for advice in advisor.update(torchrun_snapshot(t, *ranks)):
            found.setdefault(advice.id, (t, advice.pid))
        t += 1.0
    return found


def test_a_rank_sleeping_in_its_forward_is_named_the_straggler_within_30_s_of_the_job_starting():
    # Both main threads are off the CPU 90% of the time: rank 1 asleep in its compute, rank 0 in the all-reduce.
    found = raised_at({"anatomy": rank_step(0.065)}, {"anatomy": rank_step(0.005, forward=0.06)})

    at, pid = found["straggler"]
    assert pid == FIRST + 1 and at <= 30.0


def test_a_rank_burning_cpu_is_still_named_without_the_probes_step():
    found = raised_at({"busy": 0.5, "steps": 5.0}, {"busy": 0.9, "steps": 5.0})

    at, pid = found["straggler"]
    assert pid == FIRST + 1 and at <= 30.0


@pytest.mark.parametrize("anatomy", [True, False], ids=["with the step", "without it"])
def test_a_healthy_job_has_no_straggler(anatomy):
    ranks = [{"busy": 0.6, "anatomy": rank_step(0.004) if anatomy else None} for _ in range(2)]
    assert "straggler" not in raised_at(*ranks, seconds=90.0)
