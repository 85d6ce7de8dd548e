"""Every bad invocation in ``cli_abuse.py`` ends with one line on stderr and its exit status, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.security.cli_abuse import Invocation, has_traceback, invocations, run_invocation

_FILES = Path(tempfile.mkdtemp(prefix="gputop-cli-abuse-"))
_CASES = invocations(_FILES)


@pytest.fixture(scope="module")
def ended() -> Iterator[dict[Invocation, subprocess.CompletedProcess]]:
    """All of them, run a few at a time: each is a real process start, most of the time spent importing."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        yield dict(zip(_CASES, pool.map(run_invocation, _CASES)))
    shutil.rmtree(_FILES, ignore_errors=True)


@pytest.mark.parametrize("invocation", _CASES, ids=lambda i: i.name(_FILES))
def test_a_bad_invocation_ends_with_one_line_and_its_status(
    invocation: Invocation, ended: dict[Invocation, subprocess.CompletedProcess]
) -> None:
    done = ended[invocation]
    assert not has_traceback(done.stderr), done.stderr[-2000:]
    assert done.returncode == invocation.status, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("gputop:"), lines[0]
    assert "\x1b" not in done.stderr and "\x9b" not in done.stderr


def test_the_list_holds_at_least_the_79_that_were_tried() -> None:
    assert len(_CASES) >= 79
