"""``gputop stream``: one JSON snapshot per line, every interval, until stopped or ``--count``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from gputop.cli import args as checks


def add_parser(commands: Any) -> None:
    stream = commands.add_parser("stream", help="print one JSON snapshot per line, every interval, until stopped")
    checks.add_interval(stream, "stream_interval", "seconds between snapshots (default 1.0)")
    stream.add_argument("-n", "--count", type=checks.count, metavar="N", help="stop after N snapshots")
    stream.add_argument(
        "--full", action="store_true", help="whole snapshots, lossless, for gputop --host (not the schema-1 document)"
    )


def main(args: argparse.Namespace) -> int:
    return stream(args.stream_interval, args.count, args.pid, args.full)


def stream(interval_s: float, count: int | None, pid: int | None, full: bool = False) -> int:
    """One compact JSON document per line: the same schema as --json, for other programs; ``full``: the whole
    snapshot instead (``gputop.codec.snapshot_json``), for the multi-host view on another machine."""
    import json

    from gputop.codec import snapshot_json
    from gputop.collect.sampler import every
    from gputop.document import snapshot_to_dict

    with contextlib.closing(every(interval_s, focus_pid=pid, count=count)) as snapshots:
        for snap in snapshots:
            if full:  # gputop --host on another machine reads these back into snapshots
                sys.stdout.buffer.write(snapshot_json(snap) + b"\n")
            else:
                sys.stdout.write(json.dumps(snapshot_to_dict(snap), separators=(",", ":")) + "\n")
            sys.stdout.flush()
    return 0
