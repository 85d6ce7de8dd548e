"""``gputop doctor``: explain every N/A and every limit on this machine, and what to do about each."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gputop.cli.console import say


def add_parser(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="explain every N/A and every limit on this machine, and what to do about each",
        description="Check the NVIDIA driver, NVML, permissions, the PID namespace, MIG, GPM, the probe's report "
        "directory and torch, and list every value a snapshot could not read with its reason. Exit status 0 when "
        "gputop can monitor this machine (limits included), 1 when something blocks it (docs/doctor.md).",
    )
    doctor.add_argument("--json", action="store_true", dest="doctor_json", help="print a JSON document for scripts")


def main(args: argparse.Namespace) -> int:
    return doctor(args.doctor_json)


def doctor(as_json: bool) -> int:
    import json

    from gputop import __version__
    from gputop.doctor.render import render_text, report_to_dict
    from gputop.doctor.runner import run

    report = run()
    if as_json:
        sys.stdout.write(json.dumps(report_to_dict(report, __version__), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report))
    sys.stdout.flush()
    for check in report.blocking:
        say(f"monitoring is blocked: {check.title}: {check.summary}")
    return report.exit_status
