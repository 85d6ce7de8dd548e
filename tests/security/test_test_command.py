"""The README's test command on a machine without the system tools it drives, run by a user who cannot install
them: one line that names what is missing and how to get it, exit 1, before anything else is done."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import LocalUser

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_path() -> Iterator[str]:
    """A PATH with a shell and the few tools scripts/test needs before its check, and none of the tools it checks
    (in a directory the other user can enter: pytest's own temporary directories are private)."""
    bin_dir = Path(tempfile.mkdtemp(prefix="gputop-bare-path-"))
    bin_dir.chmod(0o755)
    for tool in ("bash", "dirname", "id"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    yield str(bin_dir)
    shutil.rmtree(bin_dir)


def test_a_user_without_root_gets_one_line_naming_what_is_missing(other_user: LocalUser, bare_path: str) -> None:
    path = bare_path

    result = subprocess.run(
        [f"{path}/bash", str(REPO / "scripts" / "test")],
        env={"PATH": path, "HOME": "/nonexistent"},
        cwd="/",
        capture_output=True,
        text=True,
        user=other_user.uid,
        group=other_user.gid,
        extra_groups=[],
        timeout=30,
    )

    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    missing = ["gcc", "tmux", "prometheus", "openssh-client", "slurm-wlm", "munge", "kubernetes-client"]
    if not os.access("/usr/sbin/sshd", os.X_OK):
        missing.insert(3, "openssh-server")
    assert line.startswith(f"scripts/test: the tests need {' '.join(missing)}: install them"), line
    assert f"sudo apt-get install {' '.join(missing)}" in line
    assert "scripts/test -m fast" in line
