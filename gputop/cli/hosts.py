"""The multi-host view's options, ``--host``, ``--hosts-file`` and ``--ssh-option``, and starting the view."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from gputop.cli.console import error, needs_textual
from gputop.remote.hostspec import HostsError
from gputop.remote.options import SSH_ENV, HostsRequest, hosts_request


def add_options(parser: argparse.ArgumentParser) -> None:
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
        "--prometheus",
        metavar="URL",
        help="watch every host the Prometheus server at URL holds gputop export or dcgm-exporter series of",
    )
    group.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPTION",
        dest="ssh_options",
        help=f"pass -o OPTION to ssh (repeatable; ${SSH_ENV} replaces the ssh command itself)",
    )


def request(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> HostsRequest | None:
    """The hosts to watch, or None when none of ``--host``, ``--hosts-file`` and ``--prometheus`` was given.

    Raises ``HostsError`` (one line) for a bad host, a bad hosts file, a bad URL or options that do not go together.
    """
    prometheus = getattr(args, "prometheus", None)
    if prometheus is not None:
        return _prometheus_request(args, prometheus)
    if not args.hosts and args.hosts_file is None:
        if args.ssh_options:
            raise HostsError("--ssh-option needs --host or --hosts-file")
        return None
    _alone("--host and --hosts-file", args)
    return hosts_request(args.hosts, args.hosts_file, args.ssh_options, environ)


def _prometheus_request(args: argparse.Namespace, url: str) -> HostsRequest:
    from gputop.remote.prometheus.query import PrometheusError, server_url

    if args.hosts or args.hosts_file is not None or args.ssh_options:
        raise HostsError(
            "--prometheus reads every host from Prometheus: it cannot be combined with --host, "
            "--hosts-file or --ssh-option"
        )
    _alone("--prometheus", args)
    try:
        return HostsRequest((), prometheus=server_url(url))
    except PrometheusError as exc:
        raise HostsError(str(exc)) from None


def _alone(what: str, args: argparse.Namespace) -> None:
    for flag, given in (
        ("--once", args.once),
        ("--json", args.json),
        ("--pid", args.pid is not None),
        ("--job", getattr(args, "job", None) is not None),
        (f"gputop {args.command}", args.command is not None),
    ):
        if given:
            raise HostsError(f"{what} cannot be combined with {flag}")


def show(hosts: HostsRequest, interval_s: float, readonly: bool) -> int:
    """Run the multi-host view until the user quits; returns the exit status."""
    try:
        from gputop.ui.hosts.app import run_fleet, run_hosts
    except ImportError as exc:
        return needs_textual(exc, "the multi-host view")
    if hosts.prometheus is None:
        return run_hosts(hosts, interval_s=interval_s, readonly=readonly)
    from gputop.remote.prometheus.query import PrometheusError, http_query
    from gputop.remote.prometheus.source import PrometheusFleet

    fleet = PrometheusFleet(hosts.prometheus, http_query(hosts.prometheus), interval_s)
    try:
        fleet.discover()
    except PrometheusError as exc:
        return error(str(exc), 1)
    return run_fleet(fleet, interval_s=interval_s, readonly=readonly)
