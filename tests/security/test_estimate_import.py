"""`gputop estimate MODEL` run by root where another user can plant Python: a module planted in the current
directory, or a `torch.py` beside it, must never run. Real planted files, written by the real second user, and the
real `gputop` command as it is installed (`python -m` would put the current directory first by itself)."""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

GPUTOP = str(Path(sys.executable).with_name("gputop"))

MARK = """
import os, pathlib
pathlib.Path(__file__).with_name(f"ran-as-{os.geteuid()}").touch()
"""
PLANTED = (
    MARK
    + """
from torch import nn
def model():
    return nn.Linear(8, 8)
"""
)
"""Leaves a mark beside itself when it runs, then looks like a model."""

OWN = """
from torch import nn
def model():
    return nn.Linear(8, 2)
"""


def estimate(
    model: str, cwd: Path, pythonpath: Path | None = None, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [*(command or [GPUTOP]), "estimate", model, "--input", "8", "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def plant(other_user, path: Path, text: str = PLANTED) -> None:
    other_user.run(["sh", "-c", 'cat > "$1"', "sh", str(path)], input=text.encode())


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def ran(directory: Path) -> bool:
    return (directory / f"ran-as-{os.geteuid()}").exists()


@pytest.fixture
def shared(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory every user can write to, sticky as /tmp is, or as a careless share is (``777``, asked for by
    indirect parametrization); outside pytest's private temporary tree, so that the other user can reach it."""
    path = Path(tempfile.mkdtemp(prefix="gputop-shared-", dir="/tmp"))
    path.chmod(getattr(request, "param", 0o1777))
    yield path
    shutil.rmtree(path, ignore_errors=True)


BOTH = pytest.mark.parametrize("shared", [0o1777, 0o777], ids=["sticky", "open"], indirect=True)


@pytest.fixture
def own(tmp_path: Path) -> Path:
    """The user's own module, in a directory of theirs that they name in PYTHONPATH."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "net.py").write_text(OWN)
    return mine


@BOTH
def test_a_module_planted_in_a_shared_current_directory_is_refused_with_the_way_to_name_it(shared: Path, other_user):
    plant(other_user, shared / "net.py")
    mode = f"{shared.stat().st_mode & 0o7777:o}"
    assert refusal(estimate("net:model", cwd=shared)) == (
        f"gputop: error: not importing net from the current directory {shared}: every user can write to it "
        f"(mode {mode}); if you trust what is in it, name it: PYTHONPATH={shared}"
    )
    assert not ran(shared)


def test_the_module_pythonpath_names_is_imported_not_the_one_planted_in_the_current_directory(
    shared: Path,
    other_user,
    own: Path,
):
    plant(other_user, shared / "net.py")
    result = estimate("net:model", cwd=shared, pythonpath=own)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["parameters"] == 8 * 2 + 2
    assert not ran(shared)


def test_a_module_planted_under_the_name_of_one_the_users_module_imports_is_not_imported(
    shared: Path, other_user, own: Path
):
    (own / "net.py").write_text("from blocks import model\n")
    (own / "blocks.py").write_text(OWN)
    plant(other_user, shared / "blocks.py")
    result = estimate("net:model", cwd=shared, pythonpath=own)
    assert result.returncode == 0, result.stderr
    assert not ran(shared)


def test_under_python_m_a_torch_planted_in_the_current_directory_is_not_imported(shared: Path, other_user, own: Path):
    plant(other_user, shared / "torch.py", MARK)
    result = estimate("net:model", cwd=shared, pythonpath=own, command=[sys.executable, "-m", "gputop"])
    assert result.returncode == 0, result.stderr
    assert not ran(shared)


def test_a_shared_directory_named_in_pythonpath_is_imported_from(shared: Path, other_user):
    plant(other_user, shared / "net.py")
    result = estimate("net:model", cwd=shared, pythonpath=shared)
    assert result.returncode == 0, result.stderr
    assert ran(shared), "the user named it: their choice"


def test_a_current_directory_that_belongs_to_another_user_is_refused(shared: Path, other_user):
    theirs = shared / "theirs"
    other_user.run(["mkdir", "-m", "755", str(theirs)])
    plant(other_user, theirs / "net.py")
    line = refusal(estimate("net:model", cwd=theirs))
    assert f"not importing net from the current directory {theirs}: it belongs to {other_user.name};" in line
    assert not ran(theirs)


@BOTH
def test_a_directory_of_roots_inside_a_shared_one_is_safe_only_when_the_sticky_bit_keeps_it_to_root(
    shared: Path,
):
    project = shared / "project"
    project.mkdir(mode=0o755)
    (project / "net.py").write_text(PLANTED)
    result = estimate("net:model", cwd=project)
    if shared.stat().st_mode & 0o1000:
        assert result.returncode == 0, result.stderr
        assert ran(project)
    else:  # another user can rename project away and put a directory of their own in its place
        line = refusal(result)
        assert f"every user can write to {shared} above it (mode 777)" in line
        assert not ran(project)


def test_a_directory_a_group_of_others_can_write_to_is_refused(tmp_path: Path, other_user):
    project = tmp_path / "project"
    project.mkdir()
    os.chown(project, 0, other_user.gid)
    project.chmod(0o775)
    (project / "net.py").write_text(PLANTED)
    line = refusal(estimate("net:model", cwd=project))
    assert f"group {other_user.name} can write to it (mode 775)" in line
    assert not ran(project)


def test_a_directory_only_its_owners_private_group_can_write_to_is_the_owners(tmp_path: Path):
    own_group = grp.getgrgid(os.getegid())
    if own_group.gr_mem:
        pytest.skip(f"group {own_group.gr_name} has members: not a user-private group here")
    project = tmp_path / "project"
    project.mkdir()
    project.chmod(0o775)  # what umask 002 gives on systems with a group per user
    (project / "net.py").write_text(OWN)
    result = estimate("net:model", cwd=project)
    assert result.returncode == 0, result.stderr


def test_a_module_in_the_users_own_current_directory_is_imported(tmp_path: Path):
    (tmp_path / "net.py").write_text(OWN)
    tmp_path.chmod(0o700)
    result = estimate("net:model", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["parameters"] == 8 * 2 + 2
