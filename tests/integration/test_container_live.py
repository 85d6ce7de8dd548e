"""A real process moved into a real cgroup named as Docker and Slurm name theirs: `gputop --once --json` shows the
container of that GPU process (fake driver). Needs a writable cgroup v2 hierarchy (root, or a delegated one);
skipped elsewhere."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import driver, gputop  # noqa: F401  (driver: the fixture)
from tests.machines import training_box

CONTAINER_ID = "feedc0de" * 8


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid)."""
    try:
        mounts = Path("/proc/self/mounts").read_text()
    except OSError:
        return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


@pytest.fixture
def cgroup_maker() -> Iterator[Callable[[str, int], str]]:
    """Makes a cgroup at ``<a test root>/<path>`` and moves a PID into it; returns the path /proc shows. Every
    cgroup made is removed at the end (its processes must be gone by then)."""
    mount = cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup v2 hierarchy is mounted")
    root = mount / f"gputop-test-{uuid.uuid4().hex[:8]}"
    try:
        root.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup here: {exc.strerror}")
    made: list[Path] = [root]

    def make(path: str, pid: int) -> str:
        leaf = root / path
        for parent in reversed([leaf, *leaf.parents]):
            if parent.is_relative_to(root) and parent != root and not parent.exists():
                parent.mkdir()
                made.append(parent)
        (leaf / "cgroup.procs").write_text(str(pid))
        return "/" + str(leaf.relative_to(mount))

    try:
        yield make
    finally:
        for cgroup in reversed(made):
            for _ in range(50):  # a killed process leaves its cgroup a moment after wait() returns
                try:
                    cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def test_gputop_json_shows_the_container_a_gpu_process_was_moved_into(driver, spawn, cgroup_maker):  # noqa: F811
    docker, slurm = spawn(), spawn()
    docker_path = cgroup_maker(f"system.slice/docker-{CONTAINER_ID}.scope", docker.pid)
    slurm_path = cgroup_maker("system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", slurm.pid)
    assert f"0::{docker_path}" in Path(f"/proc/{docker.pid}/cgroup").read_text()
    driver.write(training_box(2, [docker.pid, slurm.pid]))

    result = gputop("--once", "--json", env=driver.env())

    for proc in (docker, slurm):
        proc.kill()
        proc.wait()
    assert result.returncode == 0, result.stderr
    rows = {row["pid"]: row for row in json.loads(result.stdout)["processes"]}
    assert rows[docker.pid]["container"] == {
        "runtime": "docker",
        "id": CONTAINER_ID,
        "pod_uid": None,
        "name": None,
        "path": docker_path,
    }
    assert rows[slurm.pid]["container"]["runtime"] == "slurm"
    assert rows[slurm.pid]["container"]["name"] == "4242"
    assert rows[slurm.pid]["container"]["path"] == slurm_path


def test_this_process_reads_its_own_cgroup_through_the_collector():
    from gputop.collect.host import HostCollector

    own = HostCollector().processes([os.getpid()])[os.getpid()]
    assert "container" not in own.unavailable or own.unavailable["container"].startswith("cgroup namespace")
