"""What replaying and reporting on a recording cost: an hour of an 8-GPU training box at 1 s, through the real
store and the real advisor.

Each snapshot is the 8-GPU machine of ``recording_size.py`` plus one training process whose DataLoader cannot keep
up (the dashboard tests' starved job, its numbers changing every second), so the advisor has findings to keep for
most of the hour. Measured: the timeline index a replay reads when it opens, reading one snapshot as a replay
step does, the advisor over the whole file as ``gputop report FILE`` and the replay's background pass run it, and
the memory the findings of every snapshot take.

usage: python benchmarks/replay_cost.py [--seconds 3600]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recording_size import synthetic  # noqa: E402

from gputop.advisor import AdvisorConfig  # noqa: E402
from gputop.advisor.report import report_recording  # noqa: E402
from gputop.advisor.timeline import advise  # noqa: E402
from gputop.store import Recorder, open_recording  # noqa: E402
from tests.ui import training_scenes  # noqa: E402


def training_box(t: float, rng: random.Random) -> object:
    machine = synthetic(t, rng)
    job = training_scenes.starved_job(t)
    return replace(
        machine,
        processes=(*machine.processes, *job.processes),
        host_processes=(*machine.host_processes, *job.host_processes),
        training=job.training,
        focus_pid=training_scenes.JOB_PID,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3600, help="length of the recording (one snapshot a second)")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "hour.gputop"
        clock = [0.0]
        with Recorder(path, 1.0, clock=lambda: clock[0]) as recorder:
            for i in range(args.seconds):
                clock[0] = float(i)
                recorder.append(training_box(1_800_000_000.0 + i, rng))
        size = path.stat().st_size

        with open_recording(path) as recording:
            started = time.process_time()
            index = recording.index()
            index_s = time.process_time() - started
            picks = [index[i][0] for i in range(0, len(index), max(1, len(index) // 200))]
            started = time.process_time()
            for rowid in picks:
                recording.read(rowid)
            read_s = (time.process_time() - started) / len(picks)

        started = time.process_time()
        with open_recording(path) as recording:
            report = report_recording(recording, None, AdvisorConfig())
        report_s = time.process_time() - started
        with open_recording(path) as recording:
            started = time.process_time()
            decoded = sum(1 for _ in recording)
            decode_s = (time.process_time() - started) / decoded

        with open_recording(path) as recording:
            snapshots = list(recording)
        tracemalloc.start()
        timeline = advise(snapshots, training_scenes.JOB_PID)
        kept, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    count = len(index)
    print(f"recording: {count} snapshots (8 GPUs, 17 GPU processes, 1 training job), {size / 1024**2:.1f} MiB")
    print(f"timeline index (replay opening): {index_s * 1000:.0f} ms CPU for all {count} rows")
    print(f"one snapshot read and decoded, rows spread over the file (a jump): {read_s * 1000:.2f} ms CPU")
    print(f"every snapshot read and decoded in order: {decode_s * 1000:.2f} ms CPU per snapshot")
    print(
        f"advisor over the whole file (gputop report FILE): {report_s:.1f} s CPU, "
        f"{report_s / count * 1000:.2f} ms per snapshot; {len(report.timeline.findings)} findings"
    )
    held = sum(len(active) for active in timeline.active) / count
    print(f"findings kept for every snapshot: {kept / count:.0f} bytes per snapshot ({held:.1f} active on average)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
