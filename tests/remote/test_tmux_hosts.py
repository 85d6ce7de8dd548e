"""The real ``gputop --hosts-file`` in a real terminal (tmux) over two real sshd "hosts": one dies mid-run, the
other keeps updating, and the dead one is marked down and comes back when its sshd does."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakenvml.state import FakeState
from tests.machines import h100
from tests.remote.conftest import GPUTOP, SshLab
from tests.ui.test_tmux import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path / "tmux.sock")
    yield server
    server.run("kill-server")


def summary(screen: str, host: str) -> str:
    """The host's summary line (the first line that starts with its name, after the cursor mark)."""
    for line in screen.splitlines():
        if re.match(rf"^[ ▶]*{re.escape(host)} ", line):
            return line
    return ""


def busy(screen: str, host: str) -> str | None:
    found = re.search(r"(\d+)%", summary(screen, host))
    return found.group(1) if found else None


def state(screen: str, host: str) -> str:
    words = summary(screen, host).replace("▶", "").split()
    return words[1] if len(words) > 1 else ""


def test_two_ssh_hosts_in_one_dashboard_survive_one_dying(tmp_path: Path, tmux: Tmux, ssh_lab: SshLab) -> None:
    node_a = ssh_lab.add("node-a", FakeState(gpus=[h100(0, util_gpu=87), h100(1, util_gpu=87)]))
    node_b = ssh_lab.add("node-b", FakeState(gpus=[h100(0, name="NVIDIA A100-SXM4-80GB", util_gpu=41)]))
    hosts = tmp_path / "hosts"
    hosts.write_text(f"# two sshd on loopback\nnode-a command={GPUTOP}\nnode-b command={GPUTOP}\n")
    status = tmp_path / "exit-status"
    tmux.start_gputop("--hosts-file", str(hosts), "-d", "0.5", env=ssh_lab.env(), status=status, size=(160, 48))

    screen = tmux.wait_until(lambda s: state(s, "node-a") == "live" and state(s, "node-b") == "live", "both hosts live")
    assert "2 hosts: 2 live" in screen
    assert re.search(r"node-a\s+live\s+2 ", summary(screen, "node-a"))
    assert busy(screen, "node-a") == "87" and busy(screen, "node-b") == "41"
    assert "A100-SXM4-80GB" in screen  # node-b's section, with its GPU

    node_a.write(FakeState(gpus=[h100(0, util_gpu=23), h100(1, util_gpu=23)]))
    tmux.wait_until(lambda s: busy(s, "node-a") == "23", "node-a's new numbers")

    node_b.kill()
    screen = tmux.wait_until(lambda s: state(s, "node-b") in ("dropped", "unreachable"), "node-b marked down")
    assert re.search(r"retry in \d+s|retrying|connection", summary(screen, "node-b"))
    assert "node-b · dropped" in screen or "node-b · unreachable" in screen  # its section's title
    # While node-b is down, node-a goes on updating.
    node_a.write(FakeState(gpus=[h100(0, util_gpu=55), h100(1, util_gpu=55)]))
    screen = tmux.wait_until(lambda s: busy(s, "node-a") == "55", "node-a updating while node-b is down")
    assert state(screen, "node-a") == "live"
    screen = tmux.wait_until(lambda s: state(s, "node-b") == "unreachable", "node-b refusing connections")
    assert "connection refused" in summary(screen, "node-b")

    node_b.start()
    node_b.write(FakeState(gpus=[h100(0, name="NVIDIA A100-SXM4-80GB", util_gpu=64)]))
    screen = tmux.wait_until(lambda s: state(s, "node-b") == "live", "node-b reconnected")
    tmux.wait_until(lambda s: busy(s, "node-b") == "64", "node-b's numbers after it came back")

    # Enter opens node-a's full dashboard, readonly (no signals to another machine); Esc comes back.
    tmux.run("send-keys", "-t", "gputop", "Enter")
    screen = tmux.wait_until(lambda s: "0  NVIDIA H100 80GB HBM3" in s and "Esc Hosts" in s, "node-a's dashboard")
    assert "k Signal" not in screen
    tmux.run("send-keys", "-t", "gputop", "Escape")
    tmux.wait_until(lambda s: state(s, "node-b") == "live" and "BUSY" in s, "the hosts again")

    tmux.run("send-keys", "-t", "gputop", "q")
    assert tmux.exit_status(status) == "0"
