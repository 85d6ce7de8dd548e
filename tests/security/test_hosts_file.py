"""``--hosts-file`` against what is not a hosts file: a device that never ends, a FIFO nobody writes to, a
directory, a file too big, endless lines, more hosts than the view can watch, control characters. Each is a
one-line error and exit status 2, before anything is started, in bounded time and memory.

The real ``gputop`` runs in a child process with its address space capped, so that reading ``/dev/zero`` whole
fails there instead of taking this machine's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.remote.hostspec import (
    MAX_HOSTS,
    MAX_HOSTS_FILE_BYTES,
    MAX_LINE_CHARS,
    HostsError,
    host_list,
    parse_host,
    read_hosts_file,
)

ADDRESS_SPACE = 2 * 1024**3


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def gputop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_capped,
    )


def fifo(tmp_path: Path) -> str:
    path = tmp_path / "hosts.fifo"
    os.mkfifo(path)
    return str(path)


def directory(tmp_path: Path) -> str:
    return str(tmp_path)


def big(tmp_path: Path) -> str:
    path = tmp_path / "hosts.big"
    path.write_text("# padding\n" * (MAX_HOSTS_FILE_BYTES // 10) + "gpu-node-01\n")
    return str(path)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda tmp_path: "/dev/zero", "not a regular file (a character device)"),
        (fifo, "not a regular file (a FIFO)"),
        (directory, "not a regular file (a directory)"),
        (big, "bigger than 1 MiB"),
    ],
    ids=["dev-zero", "fifo", "directory", "big"],
)
def test_what_is_not_a_small_regular_file_is_refused_in_one_line(tmp_path: Path, make, error: str) -> None:
    path = make(tmp_path)
    result = gputop("--hosts-file", path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr == f"gputop: error: cannot read the hosts file {path}: {error}\n"


def test_a_line_too_long_or_too_many_hosts_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("gpu-node-01\n# " + "x" * MAX_LINE_CHARS + "\n")
    with pytest.raises(HostsError) as raised:
        read_hosts_file(path)
    assert str(raised.value) == f"{path}:2: longer than {MAX_LINE_CHARS} characters"
    with pytest.raises(HostsError, match=f"--host 'a.*': longer than {MAX_LINE_CHARS} characters"):
        host_list(["a command=" + "b" * MAX_LINE_CHARS], None)

    path.write_text("".join(f"gpu-node-{n}\n" for n in range(MAX_HOSTS)))
    assert len(read_hosts_file(path)) == MAX_HOSTS
    path.write_text("".join(f"gpu-node-{n}\n" for n in range(10 * MAX_HOSTS)))
    with pytest.raises(HostsError) as raised:
        read_hosts_file(path)
    assert str(raised.value) == f"{path}:{MAX_HOSTS + 1}: more than {MAX_HOSTS} hosts"
    with pytest.raises(HostsError, match=f"more than {MAX_HOSTS} hosts"):
        host_list(["extra"], str(tmp_path / "hosts"))
    path.write_text("".join(f"gpu-node-{n}\n" for n in range(MAX_HOSTS)))
    with pytest.raises(HostsError, match=f"more than {MAX_HOSTS} hosts"):
        host_list(["extra"], str(path))


def test_control_characters_in_a_command_are_refused() -> None:
    with pytest.raises(HostsError, match=r"command= must be printable text"):
        parse_host("gpu-node-01 command=/opt/gputop\x1b[2J")
