"""What the user's ssh configuration decides, read by the real ``ssh -G``: their own timeouts stay, a prompt never
comes; without ``ssh -G``, every default is given."""

from __future__ import annotations

from gputop.remote.hostspec import HostSpec
from gputop.remote.link import ssh_argv, ssh_settings


def test_the_users_ssh_config_keeps_its_own_timeouts_but_never_its_batch_mode(tmp_path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host patient\n  ConnectTimeout 30\n  ServerAliveInterval 60\n  BatchMode no\n")
    command = ("ssh", "-F", str(config))
    for name, expected in (
        ("patient", ["BatchMode=yes", "ServerAliveCountMax=3"]),
        ("plain", ["BatchMode=yes", "ConnectTimeout=10", "ServerAliveInterval=5", "ServerAliveCountMax=3"]),
    ):
        spec = HostSpec(name, "gputop")
        settings = ssh_settings(spec, command)
        assert settings is not None, "ssh -G reads the config"
        argv = ssh_argv(spec, 1.0, command, (), settings)
        assert [argv[i + 1] for i, word in enumerate(argv) if word == "-o"] == expected, name


def test_without_ssh_g_every_default_is_given(tmp_path) -> None:
    assert ssh_settings(HostSpec("any", "gputop"), ("false",)) is None
    argv = ssh_argv(HostSpec("any", "gputop"), 1.0, ("ssh",), (), None)
    assert "ConnectTimeout=10" in argv and "ServerAliveInterval=5" in argv
