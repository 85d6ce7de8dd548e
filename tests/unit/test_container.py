"""Reading a process's container, pod, Slurm job or systemd unit from the text of its /proc/PID/cgroup.

The samples in tests/data/cgroups/ are real files published by other projects (SOURCES.md); the paths written
here cover the formats no citable sample was found for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.collect.container import MAX_CGROUP_FILE_BYTES, container_of, read_container
from gputop.model import ACCESS_DENIED, CGROUP_NAMESPACE, MALFORMED_CGROUP, PROCESS_EXITED, Container

pytestmark = pytest.mark.fast

SAMPLES = Path(__file__).parent.parent / "data" / "cgroups"
HEX = "0123456789abcdef" * 4
ROOTLESS_PODMAN = f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{HEX}.scope/container"


def sample(name: str) -> Container | None:
    found, reason = container_of((SAMPLES / name).read_text())
    assert reason is None
    return found


# (sample, runtime, id, pod UID, name)
REAL_SAMPLES = [
    (
        "docker-cgroupfs-v1.txt",
        "docker",
        "3726184226f5d3147c25fdeab5b60097e378e8a720503a5e19ecfdf29f869860",
        None,
        None,
    ),
    (
        "docker-systemd-v1-centos.txt",
        "docker",
        "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d",
        None,
        None,
    ),
    (
        "docker-in-docker-rancheros-v1.txt",
        "docker",
        "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a",
        None,
        None,
    ),
    (
        "kubernetes-cgroupfs-v1.txt",
        "kubernetes",
        "3e74d3fd9db4c9dd921ae05c2502fb984d0cde1b36e581b13f79c639da4518a1",
        "3d274242-8ee0-11e9-a8a6-1e68d864ef1a",
        None,
    ),
    (
        "kubernetes-docker-systemd-v1.txt",
        "kubernetes",
        "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70",
        "045b1e35-7f13-11e7-ac42-0050568ffca0",
        None,
    ),
    (
        "kubernetes-containerd-systemd-bottlerocket.txt",
        "kubernetes",
        "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830",
        "dd1bf9d1-241d-47f5-8e25-12de83135812",
        None,
    ),
    (
        "kubernetes-crio-1.19-v1.txt",
        "kubernetes",
        "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607",
        "8ca306fa-3c03-47fa-97dd-19979c345572",
        None,
    ),
    (
        "kubernetes-containerd-1.4-v1.txt",
        "kubernetes",
        "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e",
        "2105e389-7471-476e-a50f-6074cef29bbd",
        None,
    ),
    (
        "kubernetes-kube-proxy-v1.txt",
        "kubernetes",
        "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903",
        "f8a694f2-7c08-11e9-98da-000c29077430",
        None,
    ),
    ("ecs-v1.txt", "container", "38fac3e99302b3622be089dd41e7ccf38aff368a86cc339972075136ee2710ce", None, None),
    ("slurm-v2-fox.txt", "slurm", None, None, "1392969"),
    ("slurm-v1-older.txt", "slurm", None, None, "280678"),
    ("slurm-v1-ex3.txt", "slurm", None, None, "748468"),
]


@pytest.mark.parametrize(("name", "runtime", "container_id", "pod_uid", "job"), REAL_SAMPLES, ids=lambda v: v)
def test_each_real_sample_names_its_container(
    name: str, runtime: str, container_id: str | None, pod_uid: str | None, job: str | None
) -> None:
    found = sample(name)
    assert found is not None
    assert (found.runtime, found.id, found.pod_uid, found.name) == (runtime, container_id, pod_uid, job)


def test_every_sample_on_disk_is_checked() -> None:
    checked = {name for name, *_ in REAL_SAMPLES} | {"host-process-v1.txt", "this-machine-hybrid.txt"}
    assert {p.name for p in SAMPLES.glob("*.txt")} == checked


def test_a_host_process_in_the_root_of_every_hierarchy_has_no_container() -> None:
    assert sample("host-process-v1.txt") is None


def test_an_unknown_cgroup_of_its_own_is_shown_by_its_path() -> None:
    found = sample("this-machine-hybrid.txt")
    assert found is not None and found.runtime == "cgroup"
    assert found.path.startswith("/process_api/")


def test_the_path_is_the_one_the_container_was_read_from() -> None:
    found = sample("slurm-v2-fox.txt")
    assert found is not None and found.path == "/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"0::/system.slice/docker-{HEX}.scope\n", Container("docker", f"/system.slice/docker-{HEX}.scope", id=HEX)),
        (f"0::/docker/{HEX}\n", Container("docker", f"/docker/{HEX}", id=HEX)),
        (f"0::/machine.slice/libpod-{HEX}.scope\n", Container("podman", f"/machine.slice/libpod-{HEX}.scope", id=HEX)),
        (
            f"0::{ROOTLESS_PODMAN}\n",
            Container("podman", ROOTLESS_PODMAN, id=HEX),
        ),
        (
            f"0::/machine.slice/libpod-conmon-{HEX}.scope\n",
            Container("podman", f"/machine.slice/libpod-conmon-{HEX}.scope", id=HEX, name="conmon"),
        ),
        (
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12345678_1234_1234_1234_123456789abc"
            f".slice/cri-containerd-{HEX}.scope\n",
            Container(
                "kubernetes",
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12345678_1234_1234_1234_123456789abc"
                f".slice/cri-containerd-{HEX}.scope",
                id=HEX,
                pod_uid="12345678-1234-1234-1234-123456789abc",
            ),
        ),
        (
            f"0::/kubepods/burstable/pod12345678-1234-1234-1234-123456789abc/{HEX}\n",
            Container(
                "kubernetes",
                f"/kubepods/burstable/pod12345678-1234-1234-1234-123456789abc/{HEX}",
                id=HEX,
                pod_uid="12345678-1234-1234-1234-123456789abc",
            ),
        ),
        ("0::/lxc/web1\n", Container("lxc", "/lxc/web1", name="web1")),
        ("0::/lxc.payload.web1\n", Container("lxc", "/lxc.payload.web1", name="web1")),
        ("0::/system.slice/sshd.service\n", Container("systemd", "/system.slice/sshd.service", name="sshd.service")),
        (
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            Container("systemd", "/user.slice/user-1000.slice/session-3.scope", name="session-3.scope"),
        ),
        (
            "0::/system.slice/run-r0123456789abcdef.scope\n",
            Container("systemd", "/system.slice/run-r0123456789abcdef.scope", name="run-r0123456789abcdef.scope"),
        ),
        (
            "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n",
            Container("slurm", "/system.slice/slurmstepd.scope/job_123/step_0/user/task_0", name="123"),
        ),
        (
            "4:memory:/slurm/uid_1000/job_123/step_0\n1:name=systemd:/system.slice/slurmd.service\n",
            Container("slurm", "/slurm/uid_1000/job_123/step_0", name="123"),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_runtimes_naming_is_recognised(text: str, expected: Container) -> None:
    assert container_of(text) == (expected, None)


def test_the_v2_line_is_preferred_over_v1_for_a_unit() -> None:
    text = "1:name=systemd:/system.slice/old.service\n0::/system.slice/new.service\n"
    found, _ = container_of(text)
    assert found is not None and found.name == "new.service"


def test_init_scope_is_no_container() -> None:
    assert container_of("0::/init.scope\n") == (None, None)


def test_the_root_inside_a_cgroup_namespace_says_so_rather_than_no_container() -> None:
    assert container_of("0::/\n", in_namespace=True) == (None, CGROUP_NAMESPACE)
    assert container_of("0::/\n", in_namespace=False) == (None, None)


@pytest.mark.parametrize("text", ["", "garbage\n", "x:y\n", "0::relative\n", "\x00\x01\x02"])
def test_malformed_text_is_a_reason_not_an_error(text: str) -> None:
    assert container_of(text) == (None, MALFORMED_CGROUP)


def test_control_characters_in_a_users_own_cgroup_name_are_made_visible() -> None:
    found, _ = container_of("0::/user.slice/user-1000.slice/evil\x1b[2J.scope\n")
    assert found is not None and "\x1b" not in found.path and "\\x1b" in (found.name or "")


def test_a_huge_path_is_bounded() -> None:
    found, _ = container_of("0::/" + "a" * 1_000_000 + ".service\n")
    assert found is not None and len(found.path) <= 1024 and len(found.name or "") <= 256


def test_only_the_start_of_a_huge_file_is_read() -> None:
    text = "0::/" + "a/" * MAX_CGROUP_FILE_BYTES + f"docker/{HEX}\n"
    found, _ = container_of(text)
    assert found is None or found.runtime != "docker"


def test_a_short_hex_component_is_not_a_container_id() -> None:
    found, _ = container_of("0::/mygroup/deadbeef\n")
    assert found is not None and found.runtime == "cgroup"


def test_a_job_directory_outside_slurm_is_not_a_slurm_job() -> None:
    found, _ = container_of("0::/user.slice/job_42\n")
    assert found is not None and found.runtime == "cgroup"


@pytest.mark.parametrize("job", ["job_²", "job_١٢٣"])
def test_a_slurm_job_id_is_ascii_digits(job: str) -> None:
    found, _ = container_of(f"0::/system.slice/slurmstepd.scope/{job}/step_0/user/task_0\n")
    assert found is not None and found.runtime != "slurm"


def test_labels_read_as_the_table_shows_them() -> None:
    assert Container("docker", "/", id=HEX).label == "docker 0123456789ab"
    assert Container("kubernetes", "/", id=HEX, pod_uid="7f3a9c01-aaaa").label == "k8s 7f3a9c/01234567"
    assert Container("slurm", "/", name="123").label == "slurm job 123"
    assert Container("systemd", "/", name="sshd.service").label == "systemd sshd.service"


def test_this_process_is_read_through_the_collector() -> None:
    found, reason = read_container(os.getpid())
    assert reason is None or reason == CGROUP_NAMESPACE
    assert found is None or found.path.startswith("/")


def test_a_vanished_process_has_a_reason() -> None:
    assert read_container(2**22 + 1) == (None, PROCESS_EXITED)


def test_an_unreadable_file_has_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", denied)
    assert read_container(1) == (None, ACCESS_DENIED)


def test_a_users_own_scope_named_like_a_container_reads_as_that_container_a_claim_not_a_proof():
    # systemd-run --user --scope --unit=docker-<id>: any user may name a cgroup of their own so (docs/security.md).
    own = f"0::/user.slice/user-1000.slice/user@1000.service/app.slice/docker-{'ab' * 32}.scope"

    container, reason = container_of(own)

    assert reason is None and container is not None
    assert container.label == f"docker {'ab' * 6}"
    assert container.path.startswith("/user.slice/user-1000.slice/")  # the detail screen shows where it really is
