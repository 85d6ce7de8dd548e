"""What ``gputop report FILE`` costs on a recording whose rows lie closer together than any sampler writes them:
rows 1 ms apart (a hand-made or hostile file), 4,000, 16,000 and 32,000 of them.

Each row is the dashboard tests' starved training job (``tests/ui/training_scenes.starved_job``), its numbers
changing with the time, so the advisor has findings to keep. Measured: the CPU time (``time.process_time``) of
reading the file alone, and of the advisor's report over it as ``gputop report FILE`` makes it; the report's
cost should grow with the rows as the reading does, not faster.

usage: python benchmarks/dense_recording.py [--rows 4000 16000 32000] [--gap-ms 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputop.advisor import AdvisorConfig  # noqa: E402
from gputop.advisor.report import report_recording  # noqa: E402
from gputop.store import Recorder, open_recording  # noqa: E402
from tests.ui import training_scenes  # noqa: E402

T0 = 1_800_000_000.0


def write_dense(path: Path, rows: int, gap_s: float) -> None:
    """A recording of ``rows`` snapshots of a starved training job, ``gap_s`` apart."""
    clock = [0.0]
    with Recorder(path, gap_s, clock=lambda: clock[0]) as recorder:
        for i in range(rows):
            clock[0] = i * gap_s
            recorder.append(training_scenes.starved_job(T0 + i * gap_s))


def measure(rows: int, gap_s: float) -> tuple[int, float, float, int]:
    """The file's size, the CPU seconds to read it and to report on it, and the findings."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "dense.gputop"
        write_dense(path, rows, gap_s)
        started = time.process_time()
        with open_recording(path) as recording:
            read = sum(1 for _ in recording)
        read_s = time.process_time() - started
        assert read == rows
        started = time.process_time()
        with open_recording(path) as recording:
            report = report_recording(recording, None, AdvisorConfig())
        report_s = time.process_time() - started
        return path.stat().st_size, read_s, report_s, len(report.timeline.findings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[4000, 16000, 32000])
    parser.add_argument("--gap-ms", type=float, default=1.0, help="time between rows (default 1 ms)")
    args = parser.parse_args()
    print("| rows | file | read: CPU s | report: CPU s | report per row | findings |")
    print("|---:|---:|---:|---:|---:|---:|")
    for rows in args.rows:
        size, read_s, report_s, findings = measure(rows, args.gap_ms / 1000)
        print(
            f"| {rows:,} | {size / 1e6:.1f} MB | {read_s:.1f} | {report_s:.1f} | {report_s / rows * 1e6:.0f} µs "
            f"| {findings} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
