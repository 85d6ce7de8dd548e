"""The multi-host view's command-line options, parsed and checked here so that cli.py only calls in."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from gputop.remote.hostspec import HostsError, HostSpec, host_list

SSH_ENV = "GPUTOP_SSH"
"""The ssh command to run, split as a shell would: ``GPUTOP_SSH="ssh -F ~/.ssh/lab_config"``."""


@dataclass(frozen=True)
class HostsRequest:
    """What ``--host``/``--hosts-file`` asked for, checked."""

    specs: tuple[HostSpec, ...]
    ssh_command: tuple[str, ...] = ("ssh",)
    ssh_options: tuple[str, ...] = ()


def add_host_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("several hosts in one dashboard (docs/hosts.md)")
    group.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="HOST",
        dest="hosts",
        help="watch HOST over ssh (repeatable); 'local' is this machine; 'HOST command=PATH' runs PATH as gputop there",
    )
    group.add_argument("--hosts-file", metavar="FILE", help="watch the hosts listed in FILE, one per line")
    group.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPTION",
        dest="ssh_options",
        help=f"pass -o OPTION to ssh (repeatable; ${SSH_ENV} replaces the ssh command itself)",
    )


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


def hosts_request(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> HostsRequest | None:
    """The hosts to watch, or None when neither ``--host`` nor ``--hosts-file`` was given.

    Raises ``HostsError`` (one line) for a bad host, a bad hosts file or options that do not go together.
    """
    if not args.hosts and args.hosts_file is None:
        if args.ssh_options:
            raise HostsError("--ssh-option needs --host or --hosts-file")
        return None
    for flag, given in (
        ("--once", args.once),
        ("--json", args.json),
        ("--pid", args.pid is not None),
        (f"gputop {args.command}", args.command is not None),
    ):
        if given:
            raise HostsError(f"--host and --hosts-file cannot be combined with {flag}")
    for option in args.ssh_options:
        if not option.strip():
            raise HostsError("--ssh-option needs an option, such as Port=2222")
    specs = tuple(host_list(args.hosts, args.hosts_file))
    remote = any(not spec.local for spec in specs)
    command = ssh_command(environ.get(SSH_ENV)) if remote else ("ssh",)
    return HostsRequest(specs, command, tuple(args.ssh_options))
