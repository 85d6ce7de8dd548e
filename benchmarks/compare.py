"""Every comparison of docs/benchmarks.md in one go: gputop against nvitop (and gpustat where it has the same
mode), and the costs that have no peer, written as markdown tables.

Side by side, alternating: each round runs every tool once, the order reversed every other round (A B, B A), and
the tables give medians over the rounds, so a machine that gets busier during the run shifts every tool alike.
- ``--once --json`` against ``nvitop -1`` and ``gpustat --json``: wall time and CPU time (user + system of the
  process, from the kernel), over 8 fake GPUs and 16 GPU processes;
- the dashboards in tmux (160x48, 1 s interval): launch to first frame, CPU (% of one core) and peak RSS over
  ``--seconds``; beside them a bare Textual app showing one 16-row table, drawn and measured the same way: the
  floor that Textual itself sets;
- the benchmarks without a peer, run as they are: ``sample.py`` (snapshot cost), ``advisor_cost.py``,
  ``replay_cost.py`` (report and replay), ``recording_size.py``.

gputop's own modules are compiled to bytecode first, as an installed package is (nvitop and gpustat are pip
installed, so theirs are too).

usage: python benchmarks/compare.py [--quick] [--rounds 5] [--seconds 60] [--tools-venv DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sleepers import sleepers  # noqa: E402
from benchmarks.tui_overhead import FIRST_FRAME_MARKS, launch, tools_venv  # noqa: E402
from tests.fakenvml.build import build  # noqa: E402
from tests.fakenvml.state import write_state  # noqa: E402
from tests.machines import training_box  # noqa: E402

GPUS, GPU_PROCESSES = 8, 16
BARE_TEXTUAL = """
from textual.app import App
from textual.widgets import DataTable

class Bare(App):
    def compose(self):
        yield DataTable()

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("GPU", "name", "memory", "util")
        table.add_rows([(str(i), "NVIDIA H100 80GB HBM3", "20 GiB", "87 %") for i in range(16)])

Bare().run()
"""
"""The floor: a Textual app that shows one table of 16 rows and does nothing else."""


def alternate(rounds: int, tools: list[str], run: Callable[[str], dict[str, float]]) -> dict[str, dict[str, float]]:
    """``run(tool)`` for every tool in every round, the order reversed every other round; medians per measure."""
    results: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
    for n in range(rounds):
        for tool in tools if n % 2 == 0 else reversed(tools):
            results[tool].append(run(tool))
    return {tool: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for tool, runs in results.items() if runs}


def timed_run(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall time and CPU time of one run of ``argv`` (its output discarded)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{argv} exited {process.returncode}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


def dashboard_run(
    command: list[str],
    env: dict[str, str],
    seconds: float,
    tmp: Path,
    tool: str,
    size: str = "160x48",
    settle: float = 2,
) -> dict[str, float]:
    # a fresh tmux socket for every run
    running = launch(tool, command, env, Path(tempfile.mkdtemp(dir=tmp)), tuple(size.split("x")))
    try:
        time.sleep(settle)  # start-up work (imports, first layouts) ends before the window opens
        before, started, peak = running.cpu_s(), time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            peak = max(peak, running.rss_bytes())
            time.sleep(0.5)
        cpu = 100 * (running.cpu_s() - before) / (time.perf_counter() - started)
        return {"first_frame_s": running.first_frame_s, "cpu_percent": cpu, "rss_mib": peak / 2**20}
    finally:
        running.tmux.kill()


def run_script(name: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each side-by-side measure")
    parser.add_argument("--seconds", type=float, default=60.0, help="dashboard window per round")
    parser.add_argument("--tools-venv", type=Path, help="a venv that already has nvitop and gpustat")
    parser.add_argument("--quick", action="store_true", help="3 rounds, 15 s windows, shorter benchmarks")
    parser.add_argument("--out", type=Path, help="also write the tables here")
    parser.add_argument("--gpus", type=int, default=GPUS, help="fake GPUs (64 for the scale row)")
    parser.add_argument("--processes", type=int, default=GPU_PROCESSES, help="GPU processes (2000 for the scale row)")
    parser.add_argument("--size", default="160x48", help="the dashboards' terminal, COLUMNSxLINES (140x40 as well)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after the first frame before the window")
    parser.add_argument(
        "--only", action="append", choices=("once", "dashboards", "scripts"), help="run only these parts"
    )
    parser.add_argument("--without", action="append", default=[], help="leave this tool out (gpustat, bare-textual)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 3, 15.0
    compileall.compile_dir(ROOT / "gputop", quiet=1)
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gputop-compare-") as name, sleepers(args.processes) as group:
        tmp = Path(name)
        state = tmp / "nvml-state.txt"
        write_state(state, training_box(args.gpus, group.pids))
        env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state), "TERM": "xterm-256color"}
        time.sleep(2.1)  # the fake re-parses a state file younger than 2 s at every call
        bin_dir = tools_venv(args.tools_venv, tmp) / "bin"
        gputop = str(Path(sys.executable).with_name("gputop"))

        once = {
            "gputop --once --json": [gputop, "--once", "--json"],
            "nvitop -1": [str(bin_dir / "nvitop"), "-1"],
            "gpustat --json": [str(bin_dir / "gpustat"), "--json"],
        }
        once = {k: v for k, v in once.items() if k.split()[0] not in args.without}
        parts = set(args.only or ("once", "dashboards", "scripts"))
        medians = (
            alternate(args.rounds * 3, list(once), lambda tool: timed_run(once[tool], env)) if "once" in parts else {}
        )
        peer = medians.get("nvitop -1", {})
        out += [
            f"One snapshot printed, {args.gpus} fake GPUs, {args.processes} GPU processes, "
            f"medians of {args.rounds * 3} alternating runs:",
            "",
            "| command | wall | CPU | wall vs nvitop -1 |",
            "|---|---|---|---|",
        ]
        for tool, m in medians.items():
            out.append(f"| `{tool}` | {m['wall_s']:.3f} s | {m['cpu_s']:.3f} s | {m['wall_s'] / peer['wall_s']:.2f}× |")
        print("\n".join(out), flush=True)  # each table as soon as it is measured
        shown = len(out)

        FIRST_FRAME_MARKS["bare-textual"] = "H100"
        bare = tmp / "bare.py"
        bare.write_text(BARE_TEXTUAL)
        dashboards = {
            "gputop": [gputop, "-d", "1"],
            "nvitop": [str(bin_dir / "nvitop"), "--interval", "1"],
            "gpustat": [str(bin_dir / "gpustat"), "-i", "1"],
            "bare-textual": [sys.executable, str(bare)],
        }
        dashboards = {k: v for k, v in dashboards.items() if k not in args.without}
        medians = alternate(
            args.rounds if "dashboards" in parts else 0,
            list(dashboards),
            lambda tool: dashboard_run(dashboards[tool], env, args.seconds, tmp, tool, args.size, args.settle),
        )
        peer = medians.get("nvitop", {})
        out += [
            "",
            f"Dashboards in tmux ({args.size}), {args.gpus} fake GPUs, {args.processes} GPU processes, 1 s interval, "
            f"{args.seconds:g} s windows from {args.settle:g} s "
            f"after the first frame, medians of {args.rounds} alternating rounds:",
            "",
            "| tool | launch to first frame | CPU (% of one core) | CPU vs nvitop | peak RSS |",
            "|---|---|---|---|---|",
        ]
        for tool, m in medians.items():
            out.append(
                f"| {tool} | {m['first_frame_s']:.2f} s | {m['cpu_percent']:.2f} % "
                f"| {m['cpu_percent'] / peer['cpu_percent']:.2f}× | {m['rss_mib']:.0f} MiB |"
            )
    seconds = "600" if args.quick else "3600"
    scripts = (
        ("Snapshot cost (`sample.py`)", "sample.py", ["--rounds", "100", "--once-runs", "3"] if args.quick else []),
        ("Advisor (`advisor_cost.py`)", "advisor_cost.py", []),
        (f"Report and replay, {seconds} s recorded (`replay_cost.py`)", "replay_cost.py", ["--seconds", seconds]),
        ("Recording size (`recording_size.py`)", "recording_size.py", ["--seconds", seconds]),
    )
    print("\n".join(out[shown:]), flush=True)
    for title, script, script_args in scripts if "scripts" in parts else ():
        out += ["", f"{title}:", "", run_script(script, *script_args)]
        print("\n".join(out[-4:]), flush=True)
    text = "\n".join(out)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
