"""``gputop export``: Prometheus metrics served over HTTP and/or written for node_exporter (gputop/export/)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from gputop.cli import args as checks
from gputop.cli.console import error, say
from gputop.export import DEFAULT_LISTEN


def add_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="serve the snapshot as Prometheus metrics, or write it for node_exporter (docs/exporter.md)",
        description=f"Serve GPU and host metrics in the Prometheus text format on --listen (default "
        f"{DEFAULT_LISTEN}, this machine only), and/or write them to DIR/gputop.prom for node_exporter's textfile "
        "collector, refreshed every interval.",
    )
    export.add_argument("--listen", metavar="HOST:PORT", help=f"address to serve on (default {DEFAULT_LISTEN})")
    export.add_argument("--textfile", metavar="DIR", help="write DIR/gputop.prom atomically every interval")
    checks.add_interval(export, "export_interval", "seconds between refreshes (default 1.0)")
    export.add_argument(
        "--per-process", action="store_true", help="add per-process series labelled by GPU and PID (no command lines)"
    )
    export.add_argument(
        "--dcgm-labels",
        action="store_true",
        help="add dcgm-exporter's label names (UUID, modelName, Hostname) beside gputop's on every GPU series",
    )
    export.add_argument(
        "--window", type=checks.window, metavar="SECONDS", dest="export_window", help=f"advisor: {checks.WINDOW_HELP}"
    )


def main(args: argparse.Namespace) -> int:
    return export(
        args.listen, args.textfile, args.export_interval, args.per_process, args.export_window, args.dcgm_labels
    )


def export(
    listen: str | None,
    textfile_dir: str | None,
    interval_s: float,
    per_process: bool,
    window_s: float | None = None,
    dcgm_labels: bool = False,
) -> int:
    """Serve on ``listen`` (``DEFAULT_LISTEN`` when no textfile is asked for) and/or write the textfile.

    ``window_s``: the advisor's window (None: the default), as ``gputop report`` and ``gputop run`` take it;
    ``dcgm_labels``: dcgm-exporter's label names beside gputop's on the GPU series.
    Returns the exit status: 2 for a bad ``--listen`` or a ``--textfile`` directory gputop cannot write to, 1 when
    the address cannot be bound, the file can no longer be written or the sampling thread died, 0 after SIGTERM,
    130 after SIGINT. Every error is one line on stderr.
    """
    import asyncio

    from gputop.export import exporter
    from gputop.export.server import parse_listen

    if listen is None and textfile_dir is None:
        listen = DEFAULT_LISTEN
    try:
        address = None if listen is None else parse_listen(listen)
    except ValueError as exc:
        return error(str(exc), 2)
    if textfile_dir is not None and not os.path.isdir(textfile_dir):
        return error(f"--textfile {textfile_dir!r} is not a directory", 2)
    if textfile_dir is not None:
        from gputop.export.textfile import textfile_path
        from gputop.files import check_replaceable

        try:  # now, not at the first refresh, after the service has been announced as up
            check_replaceable(textfile_path(textfile_dir))
        except OSError as exc:
            return error(f"cannot write --textfile {textfile_dir!r}: {exc.strerror or exc}", 2)
    try:
        config = checks.advisor_config(window_s)
        return asyncio.run(
            exporter.export(listen, address, textfile_dir, interval_s, per_process, say, config, dcgm_labels)
        )
    except exporter.ExportError as exc:
        return error(str(exc), exc.status)
