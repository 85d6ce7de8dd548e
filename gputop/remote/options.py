"""What the multi-host view's options ask for, checked: the hosts, and the ssh command and options to reach them.

The options themselves are ``gputop.cli.hosts``'s."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence

from gputop.frozen import immutable
from gputop.remote.hostspec import HostsError, HostSpec, host_list

SSH_ENV = "GPUTOP_SSH"
"""The ssh command to run, split as a shell would: ``GPUTOP_SSH="ssh -F ~/.ssh/lab_config"``."""


@immutable
class HostsRequest:
    """What ``--host``/``--hosts-file`` asked for, checked."""

    specs: tuple[HostSpec, ...]
    ssh_command: tuple[str, ...] = ("ssh",)
    ssh_options: tuple[str, ...] = ()
    prometheus: str | None = None
    """``--prometheus``'s server URL, checked: the hosts are those it holds, not ``specs``."""


def ssh_command(text: str | None) -> tuple[str, ...]:
    """``$GPUTOP_SSH`` split into words, or plain ``ssh``; the program must exist."""
    if text is None:
        words = ["ssh"]
    else:
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise HostsError(f"${SSH_ENV} cannot be split: {exc}") from None
        if not words:
            raise HostsError(f"${SSH_ENV} is empty: unset it to use ssh")
    if shutil.which(words[0]) is None:
        raise HostsError(f"{words[0]} not found: the multi-host view needs an OpenSSH client (or ${SSH_ENV})")
    return tuple(words)


def hosts_request(
    hosts: Sequence[str], hosts_file: str | None, ssh_options: Sequence[str], environ: Mapping[str, str] = os.environ
) -> HostsRequest:
    """The hosts given by ``--host`` (``hosts``) and ``--hosts-file``, checked, with ssh's command and options.

    Raises ``HostsError`` (one line) for a bad host, a bad hosts file or a bad ssh option.
    """
    for option in ssh_options:
        if not option.strip():
            raise HostsError("--ssh-option needs an option, such as Port=2222")
    specs = tuple(host_list(hosts, hosts_file))
    remote = any(not spec.local for spec in specs)
    command = ssh_command(environ.get(SSH_ENV)) if remote else ("ssh",)
    return HostsRequest(specs, command, tuple(ssh_options))
