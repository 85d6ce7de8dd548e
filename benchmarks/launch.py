"""Launch to first frame, gputop against nvitop and a bare Textual app, in tmux, alternating round by round.

Each launch gets a fresh private tmux server of ``--size`` (160x48 unless told), the tool exec'd into its pane
over 8 fake GPUs and 16 GPU processes (tests/fakenvml, real sleeping processes), and the pane polled every 10 ms.
Measured per tool, medians over ``--rounds`` (each round runs every tool once, the order reversed every other
round):
- first useful frame: the GPUs on screen with their memory (gputop's plain first frame, nvitop's first frame);
- first dashboard frame: gputop's first Textual frame (its status line), whatever it shows;
- first frame with data: gputop's Textual dashboard with its GPU cards filled in (its footer and a card's memory
  figure on screen), nvitop's first frame, the bare app's table;
- CPU at that frame: user + system time the process had used by then (rusage via /proc), which a busy machine
  shifts far less than the wall time;
- quit: from the quit key (``q``; the bare app's ``ctrl+q``), sent ``--settle`` seconds after the frame with data,
  to the process's end, polled every 2 ms.

``--bytecode none`` removes gputop's ``__pycache__`` first and runs with ``PYTHONDONTWRITEBYTECODE=1``, as a
source checkout in an environment that sets it does (every start compiles gputop's modules again); the default
compiles them first, as an installed package is. nvitop is looked for beside this Python (``pip install
nvitop==1.7.2`` into the same venv) unless ``--tools-venv`` names another.

usage: python benchmarks/launch.py [--rounds 10] [--size 160x48] [--bytecode compiled|none] [--tools-venv DIR]
       [--settle 2]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.compare import BARE_TEXTUAL  # noqa: E402
from benchmarks.sleepers import sleepers  # noqa: E402
from benchmarks.tui_overhead import Tmux  # noqa: E402
from tests.fakenvml.build import build  # noqa: E402
from tests.fakenvml.state import write_state  # noqa: E402
from tests.machines import training_box  # noqa: E402

GPUS, GPU_PROCESSES = 8, 16
DASHBOARD = {"gputop": r"graphs \d+ min", "nvitop": r"20\.00GiB", "bare-textual": r"H100"}
"""The first frame the dashboard itself draws (gputop's status line, which the plain table does not have)."""
USEFUL = {"gputop": r"H100.*GiB", "nvitop": r"20\.00GiB", "bare-textual": r"H100"}
"""A frame that shows the GPUs with a reading: gputop's plain table or its dashboard, nvitop's first frame."""
WITH_DATA = {"gputop": r"(?s)(?=.*\? Help)(?=.*GiB / 80\.0GiB)", "nvitop": r"20\.00GiB", "bare-textual": r"H100"}
"""gputop's Textual dashboard with its cards drawn (the footer, and a card's memory, which the plain table writes
as ``GiB / 80.0GiB`` too but without the footer); the others' first frames."""
QUIT_KEY = {"gputop": "q", "nvitop": "q", "bare-textual": "C-q"}


def ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def launch_once(
    tool: str, argv: list[str], env: dict[str, str], size: tuple[int, int], tmp: Path, settle_s: float
) -> dict[str, float]:
    tmux = Tmux(Path(tempfile.mkdtemp(dir=tmp)) / "tmux.sock")
    try:
        tmux("new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]), "bash --norc --noprofile")
        pid = int(tmux("display", "-p", "-t", "t", "#{pane_pid}"))
        process = psutil.Process(pid)
        line = "exec env " + " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(argv)
        found: dict[str, float] = {}
        started = time.perf_counter()
        tmux("send-keys", "-t", "t", line, "Enter")
        while "data_s" not in found:
            screen = tmux("capture-pane", "-p", "-t", "t")
            now = time.perf_counter() - started
            if "useful_s" not in found and re.search(USEFUL[tool], screen):
                found["useful_s"] = now
            if "dashboard_s" not in found and re.search(DASHBOARD[tool], screen):
                found["dashboard_s"] = now
            if re.search(WITH_DATA[tool], screen):
                found["data_s"] = now
                # A frame caught while the terminal is still taking it in may lack its first line: it is the
                # dashboard's all the same.
                found.setdefault("dashboard_s", now)
                found["data_cpu_s"] = sum(process.cpu_times()[:2])
            if now > 30:
                raise RuntimeError(f"{tool} drew no frame with data in 30 s:\n{screen}")
            time.sleep(0.01)
        time.sleep(settle_s)
        asked = time.perf_counter()
        tmux("send-keys", "-t", "t", QUIT_KEY.get(tool, "q"))
        while not ended(process):
            if time.perf_counter() - asked > 30:
                raise RuntimeError(f"{tool} did not end in 30 s after its quit key")
            time.sleep(0.002)
        found["quit_s"] = time.perf_counter() - asked
        return found
    finally:
        tmux.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--size", default="160x48", help="the terminal, COLUMNSxLINES")
    parser.add_argument("--bytecode", choices=("compiled", "none"), default="compiled")
    parser.add_argument("--tools-venv", type=Path, help="a venv with nvitop (default: this Python's)")
    parser.add_argument("--tools", default="gputop,nvitop,bare-textual")
    parser.add_argument("--before", type=Path, help="a checkout of gputop to time beside this one (gputop-before)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds from the frame with data to the quit key")
    args = parser.parse_args()
    size = tuple(int(n) for n in args.size.split("x"))
    assert len(size) == 2
    if args.bytecode == "compiled":
        compileall.compile_dir(ROOT / "gputop", quiet=1)
    else:
        for cache in (ROOT / "gputop").rglob("__pycache__"):
            shutil.rmtree(cache)
    bin_dir = (args.tools_venv / "bin") if args.tools_venv else Path(sys.executable).parent
    tools = args.tools.split(",")
    with tempfile.TemporaryDirectory(prefix="gputop-launch-") as name, sleepers(GPU_PROCESSES) as group:
        tmp = Path(name)
        state = tmp / "nvml-state.txt"
        write_state(state, training_box(GPUS, group.pids))
        bare = tmp / "bare.py"
        bare.write_text(BARE_TEXTUAL)
        env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state), "TERM": "xterm-256color"}
        if args.bytecode == "none":
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        commands = {
            "gputop": [str(bin_dir / "gputop"), "-d", "1"],
            "nvitop": [str(bin_dir / "nvitop"), "--interval", "1"],
            "bare-textual": [sys.executable, str(bare)],
        }
        if args.before:
            tools.append("gputop-before")
            # -P: not the current directory first on the path, which is this checkout when run from its root.
            before = ["env", f"PYTHONPATH={args.before}", sys.executable, "-P", "-m", "gputop", "-d", "1"]
            commands["gputop-before"] = before
            for marks in (USEFUL, DASHBOARD, WITH_DATA):
                marks["gputop-before"] = marks["gputop"]
        time.sleep(2.1)  # the fake re-parses a state file younger than 2 s at every call
        runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
        loads = [os.getloadavg()[0]]
        for n in range(args.rounds):
            for tool in tools if n % 2 == 0 else reversed(tools):
                runs[tool].append(launch_once(tool, commands[tool], env, size, tmp, args.settle))
            loads.append(os.getloadavg()[0])
    print(
        f"Launch in tmux {args.size}, {GPUS} fake GPUs / {GPU_PROCESSES} processes, gputop bytecode {args.bytecode}, "
        f"medians of {args.rounds} alternating rounds, load average {min(loads):.1f}-{max(loads):.1f}:\n"
    )
    print("| tool | first useful frame | first dashboard frame | first frame with data | CPU at that frame | quit |")
    print("|---|---|---|---|---|---|")
    for tool, found in runs.items():
        m = {k: statistics.median(r[k] for r in found) for k in found[0]}
        print(
            f"| {tool} | {m['useful_s']:.3f} s | {m['dashboard_s']:.3f} s | {m['data_s']:.3f} s "
            f"| {m['data_cpu_s']:.3f} s | {m['quit_s']:.3f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
