"""The dashboard left running: ``gputop -d 0.1`` in tmux for ``--ticks`` ticks, over 8 fake GPUs whose processes
start and exit throughout, with one GPU lost and recovered on the way.

Every ``--churn-s`` seconds a quarter of the GPU processes (real ``sleep`` processes) exit and as many new ones
start, and the fake driver's state is rewritten with them; GPU 1 answers ``GPU_IS_LOST`` from 40 % to 60 % of the
run. Reported: the dashboard's RSS after warm-up and at the end, its peak, and its CPU per second in the first and
the last tenth after warm-up (drift). Warm-up lasts ``--warmup-s``, by default just over the 300 s of trends the
dashboard keeps for every process it saw (``gputop.ui.history.HISTORY_S``): until then the history of processes
that came and went grows by design.

usage: python benchmarks/soak.py [--ticks 10000] [--processes 64] [--warmup-s S] [--code CHECKOUT] [--out FILE]
Targets (docs/benchmarks.md): RSS growth after warm-up <= 2 MiB; no CPU drift.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sleepers import Sleepers  # noqa: E402
from benchmarks.tui_overhead import launch  # noqa: E402
from gputop.ui.history import HISTORY_S  # noqa: E402
from tests.fakenvml.build import build  # noqa: E402
from tests.fakenvml.state import write_state  # noqa: E402
from tests.machines import training_box  # noqa: E402

GPUS = 8
INTERVAL_S = 0.1
LOST_GPU = 1


def write_machine(path: Path, pids: list[int], lost: bool) -> None:
    state = training_box(GPUS, pids)
    if lost:
        state.gpus[LOST_GPU].errors = {"*": "GPU_IS_LOST"}
    write_state(path, state)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--churn-s", type=float, default=5.0, help="seconds between process turnovers")
    parser.add_argument("--warmup-s", type=float, default=HISTORY_S + 30, help="seconds before the measures start")
    parser.add_argument("--out", type=Path, help="also write the result here")
    parser.add_argument(
        "--code", type=Path, help="run gputop from this checkout instead (the code before a change, side by side)"
    )
    args = parser.parse_args()
    duration_s = args.ticks * INTERVAL_S
    readings: list[tuple[float, float, int]] = []  # (seconds since start, CPU s, RSS bytes)
    group = Sleepers()
    with tempfile.TemporaryDirectory(prefix="gputop-soak-") as name:
        tmp = Path(name)
        state = tmp / "nvml-state.txt"
        try:
            group.spawn(args.processes)
            write_machine(state, group.pids, lost=False)
            env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state), "TERM": "xterm-256color"}
            if args.code is not None:
                env["PYTHONPATH"] = str(args.code.resolve())
            command = [str(Path(sys.executable).with_name("gputop")), "-d", f"{INTERVAL_S:g}"]
            running = launch("gputop", command, env, tmp)
            try:
                started = last_churn = time.perf_counter()
                lost = False
                while (elapsed := time.perf_counter() - started) < duration_s:
                    should_lose = 0.4 <= elapsed / duration_s < 0.6
                    if time.perf_counter() - last_churn >= args.churn_s or should_lose != lost:
                        if time.perf_counter() - last_churn >= args.churn_s:
                            group.end(args.processes // 4)
                            group.spawn(args.processes // 4)
                            last_churn = time.perf_counter()
                        lost = should_lose
                        write_machine(state, group.pids, lost)
                    readings.append((elapsed, running.cpu_s(), running.rss_bytes()))
                    time.sleep(1.0)
                alive = running.process.is_running()
            finally:
                running.tmux.kill()
        finally:
            group.close()
    text = report(readings, args.ticks, duration_s, args.warmup_s, alive)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def report(
    readings: list[tuple[float, float, int]], ticks: int, duration_s: float, warmup_s: float, alive: bool
) -> str:
    warm = [r for r in readings if r[0] >= warmup_s]
    if len(warm) < 4:
        raise SystemExit(f"the run ended before {warmup_s:g} s of warm-up were over: give more --ticks")
    tenth = max(2, len(warm) // 10)
    first, last = warm[:tenth], warm[-tenth:]

    def cpu_percent(part: list[tuple[float, float, int]]) -> float:
        return 100 * (part[-1][1] - part[0][1]) / (part[-1][0] - part[0][0])

    rss_after_warmup = statistics.median(r for _, _, r in first)
    rss_end = statistics.median(r for _, _, r in last)
    mib = 2**20
    return "\n".join(
        [
            f"{ticks} ticks at {INTERVAL_S:g} s ({duration_s:.0f} s), {GPUS} fake GPUs, processes turning over, "
            f"GPU {LOST_GPU} lost from 40 % to 60 % of the run; warm-up {warmup_s:g} s; still running at the end: "
            f"{alive}",
            "",
            "| measure | value |",
            "|---|---|",
            f"| RSS after warm-up (first tenth after it) | {rss_after_warmup / mib:.1f} MiB |",
            f"| RSS at the end (last tenth) | {rss_end / mib:.1f} MiB |",
            f"| growth after warm-up | {(rss_end - rss_after_warmup) / mib:+.1f} MiB |",
            f"| peak RSS | {max(r for _, _, r in readings) / mib:.1f} MiB |",
            f"| CPU, first tenth after warm-up | {cpu_percent(first):.1f} % of a core |",
            f"| CPU, last tenth | {cpu_percent(last):.1f} % of a core |",
            f"| CPU per tick, first → last tenth | {cpu_percent(first) * INTERVAL_S * 10:.2f} → "
            f"{cpu_percent(last) * INTERVAL_S * 10:.2f} ms |",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
