"""Reading a Slurm job from its cgroup path and from ``scontrol -d show job -o`` (answers recorded from the real
Slurm 22.05.8 that tests/integration/test_slurm_live.py starts), and the GPUs of an allocation from its
environment."""

from __future__ import annotations

import pytest

from gputop.codec.decode import snapshot_from_json
from gputop.codec.encode import snapshot_json
from gputop.collect.container import container_of, slurm_ids
from gputop.collect.slurm import (
    ANOTHER_JOB,
    NO_GPUS,
    SlurmJobs,
    ask_scontrol,
    gpu_indices,
    parse_scontrol_job,
    unknown,
)
from gputop.collect.slurm_allocation import (
    allocation_from_env,
    allocation_notice,
    job_gpu_indices,
    job_gpus_first,
)
from gputop.model import DRIVER_OK, SLURM_TEXT_CHARS, DriverInfo, Gpu, HostProcess, SlurmJob, Snapshot
from tests.factories import host_info

pytestmark = pytest.mark.fast

RUNNING = (
    "JobId=4 JobName=my job UserId=root(0) GRES=gpu:8(IDX:0-7) UserId=gpuser(1003) GroupId=root(0) MCS_label=N/A "
    "Priority=4294901758 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) "
    "NodeList=localhost BatchHost=localhost NumNodes=1 NumCPUs=1 TRES=cpu=1,mem=1000M,node=1,billing=1 "
    "JOB_GRES=gpu:2   Nodes=localhost CPU_IDs=0 Mem=1000 GRES=gpu:2(IDX:0-1) MinCPUsNode=1 Features=(null) "
    "Command=(null) WorkDir=/tmp/x GRES=gpu:1(IDX:7) StdErr=/tmp/slout/out.4 Power= TresPerNode=gres:gpu:2 \n"
)


def test_a_debian_slurmd_s_v1_cgroup_named_for_its_node_is_a_slurm_job():
    found, _ = container_of("6:freezer:/slurm_localhost/uid_1003/job_2/step_batch\n4:memory:/\n0::/\n")

    assert found is not None and found.runtime == "slurm" and found.name == "2"


def test_the_step_is_read_beside_the_job():
    assert slurm_ids(["", "system.slice", "slurmstepd.scope", "job_7", "step_0", "user", "task_0"]) == ("7", "0")
    assert slurm_ids(["", "slurm", "uid_5", "job_7", "step_extern"]) == ("7", "extern")
    assert slurm_ids(["", "slurm", "uid_5", "job_7"]) == ("7", None)


def test_a_job_name_that_spells_other_fields_is_the_name_not_the_fields():
    job = parse_scontrol_job(RUNNING, "4", host="localhost")

    assert (job.name, job.user, job.state) == ("my job UserId=root(0) GRES=gpu:8(IDX:0-7)", "gpuser", "RUNNING")
    assert job.gpus == (0, 1)  # the node's GRES, not the name's nor the work directory's


def test_a_job_without_gpus_says_so():
    job = parse_scontrol_job(RUNNING.replace("GRES=gpu:2(IDX:0-1)", "GRES="), "4", host="localhost")

    assert job.gpus is None and job.unavailable["gpus"] == NO_GPUS


def test_an_answer_for_another_job_is_not_taken():
    assert parse_scontrol_job(RUNNING, "5").unavailable["name"] == ANOTHER_JOB


def test_control_characters_and_long_names_are_bounded_and_shown_escaped():
    job = parse_scontrol_job(RUNNING.replace("my job", "\x1b[31m" + "x" * 1000), "4", host="localhost")

    assert job.name is not None and "\x1b" not in job.name and len(job.name) <= SLURM_TEXT_CHARS


@pytest.mark.parametrize("gres", ["gpu:2(IDX:1-0)", "gpu:1(IDX:99999)", "gpu:1(IDX:a)", "gpu:0(IDX:N/A)"])
def test_malformed_gpu_indices_are_none(gres):
    assert gpu_indices(gres) is None


def test_gpu_indices_of_several_types_in_order():
    assert gpu_indices("gpu:a100:1(IDX:3),gpu:h100:2(IDX:5-6)") == (3, 5, 6)


def test_the_sampler_never_waits_for_slurm_and_has_the_answer_later():
    jobs = SlurmJobs(ask=lambda job_id: SlurmJob(job_id, name="train", user="alice"))

    first = jobs.job("7", "0")
    jobs.wait()

    assert first.name is None and first.step == "0"
    assert jobs.job("7", "0") == SlurmJob("7", "0", name="train", user="alice")


def test_a_lookup_that_raises_is_a_reason():
    def broken(job_id: str) -> SlurmJob:
        raise RuntimeError("boom")

    jobs = SlurmJobs(ask=broken)
    jobs.job("7")
    jobs.wait()

    assert jobs.job("7").unavailable["name"] == "error: boom"


def test_an_allocation_s_step_gpus_win_over_the_job_s_and_cuda_s():
    env = {"SLURM_JOB_ID": "12", "SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0"}

    allocation = allocation_from_env(env)

    assert allocation is not None and allocation.gpus == ("1",) and allocation.source == "SLURM_STEP_GPUS"


def test_no_allocation_without_a_valid_job_id():
    assert allocation_from_env({"SLURM_JOB_GPUS": "0"}) is None
    assert allocation_from_env({"SLURM_JOB_ID": "12; rm -rf /"}) is None


def test_uuids_map_to_nvml_indices_and_those_gpus_come_first():
    gpus = [Gpu(index=i, uuid=f"GPU-{i}", name="H100") for i in range(4)]
    allocation = allocation_from_env({"SLURM_JOB_ID": "12", "CUDA_VISIBLE_DEVICES": "GPU-3,GPU-1,GPU-9"})
    assert allocation is not None

    found = job_gpu_indices(allocation, gpus)

    assert found == (3, 1)
    assert [g.index for g in job_gpus_first(gpus, found)] == [3, 1, 0, 2]
    assert allocation_notice(allocation, found) == "slurm job 12: its GPUs 3, 1 first (CUDA_VISIBLE_DEVICES)"


def test_a_job_s_label_names_it_once_known():
    assert SlurmJob("12", name="train").label == "slurm 12 train"
    assert unknown("12", "asking").label == "slurm job 12"


def _round_trip(host: HostProcess, drop_slurm: bool = False) -> HostProcess:
    import json

    driver = DriverInfo(DRIVER_OK, driver_version="550.90.07")
    snap = Snapshot(time=1.0, host=host_info(), driver=driver, host_processes=(host,))
    plain = json.loads(snapshot_json(snap))
    if drop_slurm:  # as a recording made before processes' Slurm jobs were read
        for found in plain["host_processes"]:
            del found["slurm"]
    return snapshot_from_json(json.dumps(plain)).host_processes[0]


def test_a_process_s_slurm_job_survives_a_recording():
    host = HostProcess(12, slurm=SlurmJob("7", "0", name="train", user="alice", state="RUNNING", gpus=(0, 1)))

    assert _round_trip(host).slurm == host.slurm


def test_an_older_recording_decodes_with_the_job_not_recorded():
    decoded = _round_trip(HostProcess(12), drop_slurm=True)

    assert decoded.slurm is None and decoded.unavailable["slurm"] == "not recorded"


def test_a_recorded_job_name_past_its_bound_is_refused():
    with pytest.raises(ValueError, match=r"SlurmJob\.name"):
        _round_trip(HostProcess(12, slurm=SlurmJob("7", name="x" * (SLURM_TEXT_CHARS + 1))))


def test_scontrols_own_error_is_said_once_without_its_name_twice(monkeypatch):
    # As the real scontrol answers on a host whose slurm.conf names no controller it can resolve.
    said = b"scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
    monkeypatch.setattr("gputop.collect.slurm.shutil.which", lambda name: "/usr/bin/scontrol")

    job = ask_scontrol("12345", run=lambda argv, timeout_s: (1, said.decode()))

    assert job.unavailable["name"] == "scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host"
