"""Real ssh for the multi-host tests: ``sshd`` on loopback ports, each port a "host" with its own fake driver.

Each server gets a host key, the test's client key as its only authorized key, and ``SetEnv`` so that every
session it starts loads the fake ``libnvidia-ml.so.1`` with that host's state file. The client side is an ssh
config (``ssh -F``) naming each server by its host name, with a private known_hosts file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.factories import wait_until
from tests.fakenvml.build import build
from tests.fakenvml.state import FakeState, write_state

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
GPUTOP = Path(sys.executable).with_name("gputop")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class SshHost:
    """One sshd on a loopback port, serving one fake driver state."""

    name: str
    port: int
    directory: Path
    state_path: Path
    proc: subprocess.Popen | None = None

    def write(self, state: FakeState) -> None:
        write_state(self.state_path, state)

    def start(self) -> None:
        log = (self.directory / "sshd.log").open("ab")
        self.proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(self.directory / "sshd_config")], stdout=log, stderr=log
        )
        log.close()
        wait_until(lambda: _accepts(self.port) or self.proc.poll() is not None)
        assert self.proc.poll() is None, (self.directory / "sshd.log").read_text()

    def kill(self) -> None:
        """The server and every session it started (their shells and gputop too), as a crash would."""
        if self.proc is None:
            return
        with contextlib.suppress(psutil.NoSuchProcess):
            family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
            for proc in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(family, timeout=5)
        self.proc.wait()
        self.proc = None


@dataclass
class SshLab:
    """Hosts behind real sshd servers, and the client's ssh config that names them."""

    directory: Path
    client_key: Path
    hosts: dict[str, SshHost] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    """Every host name of the client's ssh config and the loopback port it reaches."""

    @property
    def ssh_config(self) -> Path:
        return self.directory / "ssh_config"

    @property
    def ssh_command(self) -> tuple[str, ...]:
        return ("ssh", "-F", str(self.ssh_config))

    def env(self) -> dict[str, str]:
        """What a ``gputop --host`` process needs to use this lab's ssh config."""
        return {"GPUTOP_SSH": f"ssh -F {self.ssh_config}"}

    def add(self, name: str, state: FakeState | None = None, profile: str = "r550", start: bool = True) -> SshHost:
        directory = self.directory / name
        directory.mkdir()
        host = SshHost(name, _free_port(), directory, directory / "nvml-state.txt")
        host.write(state or FakeState())
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "host_key")], check=True)
        (directory / "sshd_config").write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"Port {host.port}",
                    f"HostKey {directory / 'host_key'}",
                    f"AuthorizedKeysFile {self.client_key}.pub",
                    "PidFile none",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    f"SetEnv LD_LIBRARY_PATH={build(profile)} FAKE_NVML_STATE={host.state_path} PYTHONUNBUFFERED=1",
                    "",
                ]
            )
        )
        self.hosts[name] = host
        self.route(name, host.port)
        if start:
            host.start()
        return host

    def route(self, name: str, port: int | None = None) -> None:
        """Name ``port`` (by default one where nothing listens) ``name`` in the client's ssh config."""
        self.ports[name] = _free_port() if port is None else port
        self._write_client_config()

    def _write_client_config(self) -> None:
        blocks = [
            f"Host {name}\n"
            f"  HostName 127.0.0.1\n"
            f"  Port {port}\n"
            f"  User {psutil.Process().username()}\n"
            f"  IdentityFile {self.client_key}\n"
            f"  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.directory / 'known_hosts'}\n"
            f"  StrictHostKeyChecking accept-new\n"
            f"  ConnectTimeout 5\n"
            for name, port in self.ports.items()
        ]
        self.ssh_config.write_text("\n".join(blocks))


@pytest.fixture
def ssh_lab(tmp_path: Path) -> Iterator[SshLab]:
    if not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH (openssh-server and the ssh client) is not installed")
    if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True)  # what the openssh-server package's service would make
    directory = tmp_path / "ssh"
    directory.mkdir()
    key = directory / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    lab = SshLab(directory, key)
    try:
        yield lab
    finally:
        for host in lab.hosts.values():
            host.kill()


from tests.ui.conftest import utc  # noqa: E402, F401  (clocks on screen in UTC, as in the dashboard's tests)
