"""``command=`` reaches the remote shell as one word: a path with spaces stays whole, ``~`` still means home."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gputop.remote.fleet import Fleet
from gputop.remote.hostspec import HostSpec, parse_host
from gputop.remote.link import remote_command, ssh_argv
from gputop.remote.status import LIVE, HostEvent
from tests.factories import wait_until
from tests.fakenvml.state import FakeState
from tests.machines import h100
from tests.remote.conftest import GPUTOP, SshLab

ECHO = '#!/bin/sh\nprintf \'%s|\' "$0" "$@"\n'


def test_the_remote_command_is_one_word_for_the_shell_with_home_expanded(tmp_path: Path) -> None:
    home = tmp_path / "home dir"
    spaced = home / "my venv" / "bin"
    spaced.mkdir(parents=True)
    (spaced / "gputop").write_text(ECHO)
    (spaced / "gputop").chmod(0o755)
    for command in ("~/my venv/bin/gputop", f"{spaced}/gputop"):
        line = remote_command(command, 0.5)
        done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env={"HOME": str(home)}, check=True)
        assert done.stdout == f"{spaced}/gputop|stream|--full|-d|0.5|"
    assert remote_command("gputop", 1.0) == "gputop stream --full -d 1"
    assert remote_command("~/venv/bin/gputop", 2.0) == "~/venv/bin/gputop stream --full -d 2"
    assert remote_command("~alice/bin/gputop", 1.0) == "~alice/bin/gputop stream --full -d 1"
    assert remote_command("/opt/gpu tools/gputop", 1.0) == "'/opt/gpu tools/gputop' stream --full -d 1"
    # Nothing in the value is code for the remote shell.
    assert remote_command("gputop; rm -rf ~", 1.0) == "'gputop; rm -rf ~' stream --full -d 1"
    assert remote_command("~; reboot/x", 1.0) == "'~; reboot/x' stream --full -d 1"
    assert ssh_argv(HostSpec("a", "/opt/gpu tools/gputop"), 1.0)[-1] == "'/opt/gpu tools/gputop' stream --full -d 1"


def test_a_gputop_under_a_path_with_a_space_runs_over_real_ssh(ssh_lab: SshLab, tmp_path: Path) -> None:
    ssh_lab.add("bench", FakeState(gpus=[h100(0, util_gpu=64)]))
    tools = tmp_path / "gpu tools"
    tools.mkdir()
    (tools / "gputop").symlink_to(GPUTOP)
    spec = parse_host(f'bench command="{tools / "gputop"}"')  # as docs/hosts.md writes it
    assert spec.command == f"{tools}/gputop"
    seen: list[HostEvent] = []
    fleet = Fleet([spec], 0.3, ssh_lab.ssh_command)
    fleet.subscribe(seen.append)
    fleet.start()
    try:
        wait_until(lambda: any(e.snapshot is not None for e in seen))
    finally:
        fleet.stop()
    first = next(e for e in seen if e.snapshot is not None)
    assert first.status.state == LIVE
    assert first.snapshot is not None and first.snapshot.gpus[0].utilization_gpu_percent == 64
