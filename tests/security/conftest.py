"""Fixtures for the attacks: a real second local user, created for the session and removed after it.

gputop runs as root on shared boxes, and most attacks come from another local user who can write to a shared
directory, plant a symlink or start a process with a hostile command line. The tests run as root in CI, where
the user is real; elsewhere they are skipped with the reason. Under ``CI=true`` a user that cannot be created is
a failure, never a silent skip.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8]
OTHER_USER = f"gputop-{_RUN}-{os.environ['PYTEST_XDIST_WORKER']}" if _RUN else "gputop-other"
"""The second user's name: one per test process of a parallel run, and per run, so that a worker that ends its
session and deletes its user leaves another worker's alone, and so does another run on the same machine."""


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    gid: int

    def run(self, args: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        """Run ``args`` as this user (needs root), failing the test if it fails."""
        return subprocess.run(args, user=self.uid, group=self.gid, extra_groups=[], check=True, **kwargs)  # type: ignore[call-overload]

    def popen(self, args: list[str], **kwargs: object) -> subprocess.Popen:
        return subprocess.Popen(args, user=self.uid, group=self.gid, extra_groups=[], **kwargs)  # type: ignore[call-overload]


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    """A private directory for probe reports, as ``gputop run`` makes one."""
    path = tmp_path / "probe"
    path.mkdir(mode=0o700)
    return path


def _cannot(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the attacks need a second local user: {reason}")
    pytest.skip(f"the attacks need a second local user: {reason}")


@pytest.fixture(scope="session")
def other_user() -> Iterator[LocalUser]:
    """A real unprivileged local user, not the one running the tests."""
    if os.geteuid() != 0:
        _cannot("creating one needs root")
    if shutil.which("useradd") is None:
        _cannot("no useradd on this machine")
    try:
        entry = pwd.getpwnam(OTHER_USER)  # left by a run that was killed: this name is the tests' own
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", OTHER_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(OTHER_USER)
    try:
        yield LocalUser(OTHER_USER, entry.pw_uid, entry.pw_gid)
    finally:
        _end_processes_of(entry.pw_uid)  # userdel refuses a user who still runs something
        subprocess.run(["userdel", OTHER_USER], capture_output=True)


def _end_processes_of(uid: int) -> None:
    """Kill whatever the user still runs (a hostile job's children outlive the job the test killed)."""
    doomed = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] is not None and p.info["uids"].real == uid]
    for proc in doomed:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(doomed, timeout=5)
