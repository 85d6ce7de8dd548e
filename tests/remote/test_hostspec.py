"""Which hosts to watch: the hosts file, --host, and the one-line errors for what is wrong in them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.remote.hostspec import DEFAULT_COMMAND, LOCAL, HostsError, HostSpec, host_list, parse_host, read_hosts_file

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

HOSTS_FILE = """\
# the lab
gpu-node-01
alice@gpu-node-02   command=~/venv/bin/gputop   # in a virtual environment
  gpu-node-03 command="/opt/gpu top/bin/gputop"

local
"""


def test_a_hosts_file_lists_hosts_settings_and_this_machine(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text(HOSTS_FILE)
    assert read_hosts_file(path) == [
        HostSpec("gpu-node-01", DEFAULT_COMMAND),
        HostSpec("alice@gpu-node-02", "~/venv/bin/gputop"),
        HostSpec("gpu-node-03", "/opt/gpu top/bin/gputop"),
        HostSpec(LOCAL),
    ]
    assert read_hosts_file(path)[-1].local
    assert not HostSpec("localhost").local  # an ssh destination like any other


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("gpu-node-01 comand=gputop", "unknown setting 'comand' (known: command)"),
        ("gpu-node-01 gputop", "'gputop' is not a setting: write key=value (command)"),
        ("gpu-node-01 command=", "command= needs a value"),
        ("gpu-node-01 command=a command=b", "command is given twice"),
        ("-oProxyCommand=evil", "'-oProxyCommand=evil' is not a host name (it would be read as an ssh option)"),
        ("local command=gputop", "local is sampled by this gputop itself: command= does not apply to it"),
        ("gpu-node-01 command='unclosed", 'cannot split "gpu-node-01 command=\'unclosed": No closing quotation'),
    ],
)
def test_a_bad_line_names_its_file_and_number(tmp_path: Path, line: str, error: str) -> None:
    path = tmp_path / "hosts"
    path.write_text(f"# hosts\ngpu-node-00\n{line}\n")
    with pytest.raises(HostsError) as raised:
        read_hosts_file(path)
    assert str(raised.value) == f"{path}:3: {error}"


def test_an_unreadable_or_empty_hosts_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HostsError, match=r"cannot read the hosts file .*missing: No such file or directory"):
        read_hosts_file(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(HostsError, match="lists no host"):
        read_hosts_file(empty)


def test_host_arguments_take_a_line_and_come_before_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("gpu-node-02\n")
    hosts = host_list(["gpu-node-01 command=/opt/gputop", "local"], str(path))
    assert hosts == [HostSpec("gpu-node-01", "/opt/gputop"), HostSpec(LOCAL), HostSpec("gpu-node-02")]
    with pytest.raises(HostsError, match="host gpu-node-02 is listed twice"):
        host_list(["gpu-node-02"], str(path))
    with pytest.raises(HostsError, match="--host 'a b': 'b' is not a setting"):
        host_list(["a b"], None)
    assert parse_host("  spaced   ") == HostSpec("spaced")
