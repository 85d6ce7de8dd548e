"""``gputop`` with no command: the live dashboard, or one snapshot with ``--once`` (a table) or ``--json``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputop.cli import args as checks
from gputop.cli.console import error, needs_textual
from gputop.limits import MIN_INTERVAL_S, ONE_SHOT_WINDOW_S

if TYPE_CHECKING:
    from gputop.collect.slurm_allocation import Allocation
    from gputop.model import Snapshot


def add_options(parser: argparse.ArgumentParser) -> None:
    """The top-level options of the dashboard and its one-snapshot forms."""
    window = f"rates over a {ONE_SHOT_WINDOW_S * 1000:.0f} ms window: GPM needs 100 ms between two samples"
    parser.add_argument("--once", action="store_true", help=f"print one snapshot as a table and exit ({window})")
    parser.add_argument("--json", action="store_true", help=f"print one snapshot as JSON and exit ({window})")
    checks.add_interval(parser, "interval", f"seconds between updates (default 1.0, at least {MIN_INTERVAL_S})")
    parser.add_argument("--pid", type=checks.pid, metavar="PID", help="focus on one process, its children and workers")
    parser.add_argument(
        "--job", type=checks.job_id, metavar="ID", help="open the dashboard on one training job's ranks (its job view)"
    )
    parser.add_argument("--readonly", action="store_true", help="never send signals to processes")
    parser.add_argument(
        "--slurm-job",
        type=checks.slurm_job_id,
        metavar="ID",
        help="show this Slurm job's GPUs first (inside an allocation, SLURM_JOB_ID's are)",
    )


def check(args: argparse.Namespace) -> None:
    """Options that do not go together, before anything starts."""
    if args.command is None and args.job is not None and (args.once or args.json):
        flag = "--json" if args.json else "--once"
        raise checks.UsageError(f"--job opens the dashboard's job view; {flag} shows every job's ranks already")


def main(args: argparse.Namespace) -> int:
    try:
        allocation = slurm_allocation(getattr(args, "slurm_job", None))
    except checks.UsageError as exc:
        return error(str(exc))
    if args.once or args.json:
        return once(args.json, args.pid, allocation)
    return dashboard(args.interval, args.pid, args.readonly, args.job, allocation)


def slurm_allocation(job_id: str | None) -> Allocation | None:
    """The Slurm job whose GPUs come first: the one named (asked of ``scontrol`` now), else the allocation gputop
    runs in; a named job Slurm does not know is a UsageError."""
    if job_id is None and not os.environ.get("SLURM_JOB_ID", "").strip():
        # Outside an allocation (most starts) nothing of Slurm's is imported before the first sample: its module
        # brings subprocess, socket and the model in ahead of NVML.
        return None
    from gputop.collect.slurm import ask_scontrol
    from gputop.collect.slurm_allocation import allocation_from_env, allocation_of

    if job_id is None:
        return allocation_from_env(os.environ)
    job = ask_scontrol(job_id)
    if job.name is None and job.user is None:
        raise checks.UsageError(f"--slurm-job {job_id}: {job.unavailable.get('name', 'unknown to Slurm')}")
    return allocation_of(job)


def once(as_json: bool, pid: int | None, allocation: Allocation | None = None) -> int:
    """Print one snapshot, its rates over a short window: a table (as wide as the terminal), or JSON."""
    from gputop.collect.nvml import NvmlCollector
    from gputop.collect.sampler import SnapshotMaker

    # No Xid watcher: an event seen in 0.12 s would be chance, and ending its thread waits out the driver's wait.
    maker = SnapshotMaker(focus_pid=pid, nvml=NvmlCollector(watch_xids=False))
    try:
        # The modules that write the snapshot are imported inside one_shot's window, not before it.
        snap = maker.one_shot(during=lambda: writer(as_json))
    finally:
        maker.close()
    if allocation is not None and not as_json:  # JSON keeps NVML's order; each process names its job
        from gputop.collect.slurm_allocation import allocation_notice, job_gpu_indices, job_gpus_first

        found = job_gpu_indices(allocation, snap.gpus)
        snap = dataclasses.replace(snap, gpus=tuple(job_gpus_first(snap.gpus, found)))
        sys.stdout.write(allocation_notice(allocation, found) + "\n")
    sys.stdout.write(writer(as_json)(snap))
    sys.stdout.flush()
    return 0


def writer(as_json: bool) -> Callable[[Snapshot], str]:
    """What ``once`` prints for a snapshot: its JSON document and a newline, or the table as wide as the terminal."""
    if as_json:
        from gputop.document import snapshot_to_json

        return lambda snap: snapshot_to_json(snap) + "\n"
    from gputop.table import render_text

    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    return lambda snap: render_text(snap, width)


def dashboard(
    interval_s: float,
    pid: int | None,
    readonly: bool,
    job_id: str | None = None,
    allocation: Allocation | None = None,
) -> int:
    """The live dashboard: this machine's snapshots from the sampler's thread, through the advisor, until ``q``.

    On a terminal, the first snapshot is printed as the plain table of ``--once`` (on the alternate screen, which
    the dashboard then takes over) before Textual is imported: importing Textual and laying out the dashboard take
    about a quarter of a second more, the table under a tenth from launch. The sampler goes on with the same
    ``SnapshotMaker`` and shows that snapshot first, so nothing is read twice before the dashboard's first frame."""
    for package in ("textual", "rich"):
        if importlib.util.find_spec(package) is None:
            return needs_textual(ImportError(name=package), "the dashboard", ONCE_WORKS)
    from gputop.collect.sampler import Sampler, SnapshotMaker

    maker = SnapshotMaker(focus_pid=pid)
    plain = sys.stdout.isatty() and os.environ.get("TERM", "dumb") != "dumb"
    first = None
    if plain:
        first = maker.snapshot()
        first_frame(first)
    else:
        # The collectors' modules imported here, before Textual starts, not by the sampler's thread at its first
        # snapshot (SnapshotMaker makes them when first used), where they would compete with Textual's start.
        from gputop.collect import host, training  # noqa: F401
    try:
        from gputop.advisor import Advisor
        from gputop.ui.app import run_dashboard
        from gputop.ui.feed import LiveFeed

        feed = LiveFeed(Sampler(interval_s, maker_factory=lambda: maker, first=first), Advisor(pid))
        return run_dashboard(
            feed, interval_s=interval_s, focus_pid=pid, readonly=readonly, job_id=job_id, allocation=allocation
        )
    except BaseException:
        if plain:  # Textual never took the screen over (or failed to): back to the user's own screen
            sys.stdout.write(LEAVE_ALTERNATE_SCREEN)
            sys.stdout.flush()
        raise


ONCE_WORKS = "; gputop --once and --json work without it"
ENTER_ALTERNATE_SCREEN = "\x1b[?1049h\x1b[H\x1b[2J"
LEAVE_ALTERNATE_SCREEN = "\x1b[?1049l"


def first_frame(snap: Snapshot) -> None:
    """The snapshot as ``--once`` prints it, cut to the terminal, on the alternate screen: what the dashboard shows
    until Textual has drawn its own first frame (rates read N/A: there is no window behind them yet)."""
    from gputop.table import render_text

    size = shutil.get_terminal_size()
    lines = render_text(snap, size.columns).splitlines()[: max(1, size.lines - 1)]
    sys.stdout.write(ENTER_ALTERNATE_SCREEN + "\n".join(line[: size.columns] for line in lines))
    sys.stdout.flush()
