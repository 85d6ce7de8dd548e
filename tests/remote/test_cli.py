"""The command line of the multi-host view: ``gputop stream --full`` and the checks on --host and --hosts-file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.codec import snapshot_from_json
from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeState
from tests.machines import h100


def test_stream_full_sends_whole_snapshots_one_per_line(tmp_path: Path) -> None:
    driver = FakeDriver(tmp_path / "state.txt", "r550")
    driver.write(FakeState(gpus=[h100(0, util_gpu=42), h100(1)]))
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "stream", "--full", "-n", "2", "-d", "0.1"],
        capture_output=True,
        env=driver.env(),
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    snaps = [snapshot_from_json(line) for line in lines]
    assert [g.utilization_gpu_percent for g in snaps[0].gpus] == [42, 87]
    assert snaps[0].driver.driver_version == "550.90.07"
    assert snaps[1].time > snaps[0].time
    assert snaps[0].gpus[0].unavailable["fan_percent"]  # the reasons survive, unlike in the schema-1 document


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--host", "a", "--once"], "--host and --hosts-file cannot be combined with --once"),
        (["--host", "a", "--json"], "--host and --hosts-file cannot be combined with --json"),
        (["--host", "a", "--pid", "1"], "--host and --hosts-file cannot be combined with --pid"),
        (["--host", "a", "stream"], "--host and --hosts-file cannot be combined with gputop stream"),
        (["--host=-oProxyCommand=x"], "--host '-oProxyCommand=x': '-oProxyCommand=x' is not a host name"),
        (["--host", "a", "--host", "a"], "host a is listed twice"),
        (["--ssh-option", "Port=2"], "--ssh-option needs --host or --hosts-file"),
        (["--host", "a", "--ssh-option", " "], "--ssh-option needs an option, such as Port=2222"),
    ],
)
def test_bad_host_options_are_one_line_and_exit_2(argv: list[str], error: str, capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gputop: error: {error}")
    assert err.count("\n") == 1


def test_a_bad_hosts_file_line_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("gpu-node-01\ngpu-node-02 comand=gputop\n")
    assert main(["--hosts-file", str(hosts)]) == 2
    assert capsys.readouterr().err == f"gputop: error: {hosts}:2: unknown setting 'comand' (known: command)\n"


def test_a_missing_ssh_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("GPUTOP_SSH", "no-such-ssh -F cfg")
    assert main(["--host", "a"]) == 2
    assert "no-such-ssh not found" in capsys.readouterr().err
    monkeypatch.setenv("GPUTOP_SSH", "ssh 'unclosed")
    assert main(["--host", "a"]) == 2
    assert "$GPUTOP_SSH cannot be split" in capsys.readouterr().err
