"""How gputop's costs grow with the machine: GPUs 1, 8, 32, 64 x GPU processes 16, 256, 2,000.

The processes are real (``sleep``, one process group, killed on the way out), spread round-robin over the fake
driver's GPUs (tests/fakenvml), so the host side reads real /proc entries. For each pair:
- snapshot: median cost of a plain tick and of a tick that also reads the process lists (every 2 s), in-process;
- dashboard: the real ``gputop -d 1`` in tmux (160x48), CPU (% of one core) and peak RSS over ``--seconds``
  after a 3 s settle;
- key press: the real app driven by Textual's Pilot over a snapshot of that machine, from the key to the frame
  that shows its result: ``s`` (sort), ``pagedown`` (scroll), ``1`` typed into the filter, medians; and the
  Pilot's own round trip for an unbound key (press, then wait for idle: 20 ms sleeps, the floor of the older
  measure, which timed every key that way).

With ``--probe`` one GPU process per GPU (the first on each) reports as a training job under the probe does, with
its step anatomy (``benchmarks/reporters.py``: a real probe's report, renewed every 0.5 s): the dashboard reads and
judges those reports at every tick.

usage: python benchmarks/scale.py [--quick] [--probe] [--seconds 10] [--out FILE]
Targets (docs/benchmarks.md): cost no faster than linear in processes; at 64 GPUs and 2,000 processes a key press
within 50 ms and the dashboard under a third of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.reporters import real_report, reporting  # noqa: E402
from benchmarks.sleepers import sleepers  # noqa: E402
from benchmarks.tui_overhead import launch  # noqa: E402
from tests.fakenvml.build import build, use_in_process  # noqa: E402
from tests.fakenvml.state import write_state  # noqa: E402
from tests.machines import training_box  # noqa: E402

KEYS = {"sort": ("s",), "scroll": ("pagedown",), "filter": ("1",), "unbound": ("f12",)}
"""Timed from the key to the frame that shows its result; ``filter`` types ``1`` into the open filter field.
``unbound`` is a key nothing answers, timed as the Pilot's own round trip (press and wait for idle): the floor
under the harness's other, older measure."""
BEFORE = {"filter": ("slash",)}
AFTER = {"filter": ("escape",)}


@dataclass
class Row:
    gpus: int
    processes: int
    tick_ms: float
    slow_ms: float
    cpu_percent: float
    rss_mib: float
    keys_ms: dict[str, float]


def write_machine(path: Path, gpus: int, pids: list[int]) -> None:
    write_state(path, training_box(gpus, pids))
    time.sleep(2.1)  # the fake re-parses a state file younger than 2 s at every call


def snapshot_costs(rounds: int) -> tuple[float, float, object]:
    from gputop.collect.sampler import SnapshotMaker

    maker = SnapshotMaker(slow_interval_s=float("inf"))
    maker.start()
    try:
        snap = maker.one_shot()
        tick, slow = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            maker.snapshot()
            tick.append(time.perf_counter() - started)
        for _ in range(max(5, rounds // 5)):
            started = time.perf_counter()
            maker.snapshot(force_slow=True)
            slow.append(time.perf_counter() - started)
    finally:
        maker.close()
    return statistics.median(tick) * 1000, statistics.median(slow) * 1000, snap


async def key_latencies(snap: object, presses: int) -> dict[str, float]:
    """Key to frame: from the key's event entering the app to the last screen update its work caused (the
    compositor's update, rendered, handed to the driver), medians of ``presses``."""
    from gputop.advisor import Advisor
    from gputop.ui.app import GputopApp
    from gputop.ui.feed import LiveFeed
    from tests.ui.scenes import ScriptedSource

    app = GputopApp(LiveFeed(ScriptedSource([snap]), Advisor()))  # type: ignore[list-item]
    frames: list[float] = []
    display = app._display

    def timed_display(screen: object, renderable: object) -> None:
        display(screen, renderable)  # type: ignore[arg-type]
        if renderable is not None:
            frames.append(time.perf_counter())

    app._display = timed_display  # type: ignore[method-assign]
    took: dict[str, list[float]] = {name: [] for name in KEYS}
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for _ in range(presses):
            for name, keys in KEYS.items():
                await pilot.press(*BEFORE.get(name, ()))
                await pilot.pause()
                frames.clear()
                started = time.perf_counter()
                await pilot.press(*keys)
                await pilot.pause()
                if name == "unbound":
                    took[name].append(time.perf_counter() - started)
                elif frames:
                    took[name].append(frames[-1] - started)
                await pilot.press(*AFTER.get(name, ()))
                await pilot.pause()
    return {name: statistics.median(values) * 1000 if values else float("nan") for name, values in took.items()}


def dashboard_cost(env: dict[str, str], seconds: float, tmp: Path) -> tuple[float, float]:
    gputop = [str(Path(sys.executable).with_name("gputop")), "-d", "1"]
    running = launch("gputop", gputop, env, Path(tempfile.mkdtemp(dir=tmp)))  # a fresh tmux socket each time
    try:
        time.sleep(3)
        before, started, peak = running.cpu_s(), time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            peak = max(peak, running.rss_bytes())
            time.sleep(0.5)
        return 100 * (running.cpu_s() - before) / (time.perf_counter() - started), peak / 2**20
    finally:
        running.tmux.kill()


def table(rows: list[Row]) -> str:
    lines = [
        "| GPUs | processes | snapshot (tick) | snapshot (with process lists) | dashboard CPU | peak RSS "
        "| key to frame: sort | scroll | filter | Pilot round trip (unbound key) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        keys = " | ".join(f"{r.keys_ms[name]:.0f} ms" for name in KEYS)
        lines.append(
            f"| {r.gpus} | {r.processes} | {r.tick_ms:.2f} ms | {r.slow_ms:.2f} ms | {r.cpu_percent:.1f} % "
            f"| {r.rss_mib:.0f} MiB | {keys} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--processes", type=int, nargs="+", default=[16, 256, 2000])
    parser.add_argument("--seconds", type=float, default=10.0, help="dashboard window per pair")
    parser.add_argument("--rounds", type=int, default=50, help="snapshots timed per pair")
    parser.add_argument("--presses", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 and 64 GPUs x 16 and 2,000 processes, 5 s windows")
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument("--probe", action="store_true", help="one process per GPU reports its step anatomy")
    args = parser.parse_args()
    if args.quick:
        args.gpus, args.processes, args.seconds, args.rounds, args.presses = [1, 64], [16, 2000], 5.0, 20, 3
    rows = []
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gputop-scale-")))
        group = stack.enter_context(sleepers(max(args.processes)))
        state = tmp / "nvml-state.txt"
        env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state), "TERM": "xterm-256color"}
        os.environ["FAKE_NVML_STATE"] = str(state)
        reporters = None
        if args.probe:
            reporters = stack.enter_context(reporting(tmp / "probe", real_report(tmp)))
            env["GPUTOP_PROBE_DIR"] = os.environ["GPUTOP_PROBE_DIR"] = str(tmp / "probe")
        write_machine(state, 1, [])
        use_in_process("r550")
        for processes in args.processes:
            for gpus in args.gpus:
                if reporters is not None:  # training_box puts process i on GPU i % gpus
                    reporters.watch(group.pids[: min(gpus, processes)])
                write_machine(state, gpus, group.pids[:processes])
                tick_ms, slow_ms, snap = snapshot_costs(args.rounds)
                keys_ms = asyncio.run(key_latencies(snap, args.presses))
                cpu, rss = dashboard_cost(env, args.seconds, tmp)
                rows.append(Row(gpus, processes, tick_ms, slow_ms, cpu, rss, keys_ms))
                print(f"{gpus} GPUs, {processes} processes done", file=sys.stderr)
    text = f"{os.cpu_count()} cores; dashboard at 1 s over {args.seconds:g} s; key press medians of {args.presses}"
    text += "; one process per GPU reporting its step anatomy\n\n" if args.probe else "\n\n"
    text += table(rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
