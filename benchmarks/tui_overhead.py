"""What a dashboard costs while it sits open: gputop, nvitop and gpustat side by side, in tmux, over a fake driver.

Each tool runs in its own private tmux server (160x48) at a 1 s interval, over 8 fake H100s (tests/fakenvml)
with 16 GPU processes that are real sleeping processes, so every tool reads real /proc entries. The tools are
started one after another (each timed to its first frame alone), then measured together over the same
``--seconds`` window, so a machine that gets busier or slower during the run shifts all of them alike.
Measured per tool:
- CPU: user + system time of the tool's process (and any children) over the window, as % of one core;
- RSS: the largest resident set seen during the window;
- first frame: from the command being typed into the pane to the GPUs on screen.

nvitop and gpustat are installed into a virtual environment under the run's temporary directory
(``pip install nvitop gpustat``), or taken from ``--tools-venv`` when given. Prints a markdown table.

usage: python benchmarks/tui_overhead.py [--seconds 60] [--tools-venv DIR] [--only gputop]
Targets (docs/benchmarks.md): gputop's CPU no more than nvitop's; first frame within 0.8 s.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakenvml.build import build  # noqa: E402
from tests.fakenvml.state import write_state  # noqa: E402
from tests.machines import training_box  # noqa: E402

GPUS = 8
GPU_PROCESSES = 16
SIZE = ("160", "48")
FIRST_FRAME_MARKS = {"gputop": "H100", "nvitop": "20.00GiB", "gpustat": "H100"}
"""Text that appears once a tool has drawn the GPUs (nvitop's wide layout leaves the GPU names out)."""


@dataclass
class Result:
    tool: str
    cpu_percent: float
    rss_bytes: int
    first_frame_s: float


class Tmux:
    """A private tmux server, so nothing here touches the user's own sessions."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        command = ["tmux", "-S", str(self.socket), *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)


def tools_venv(given: Path | None, tmp: Path) -> Path:
    if given is not None:
        return given
    venv = tmp / "tools-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "nvitop", "gpustat"], check=True)
    return venv


@dataclass
class Running:
    """A tool drawing in its own tmux server."""

    tool: str
    tmux: Tmux
    process: psutil.Process
    first_frame_s: float

    def family(self) -> list[psutil.Process]:
        return [self.process, *self.process.children(recursive=True)]

    def cpu_s(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.family())

    def rss_bytes(self) -> int:
        return sum(p.memory_info().rss for p in self.family())


def launch(tool: str, argv: list[str], env: dict[str, str], tmp: Path, size: tuple[str, ...] = SIZE) -> Running:
    """Start ``tool`` in a fresh tmux server of ``size`` (columns, lines) and time it to its first frame; it is left
    running."""
    tmux = Tmux(tmp / f"{tool}.sock")
    # A shell first, the tool exec'd into it: the pane has its final size, and the pane's PID is the tool.
    tmux("new-session", "-d", "-s", tool, "-x", size[0], "-y", size[1], "bash --norc --noprofile")
    pid = int(tmux("display", "-p", "-t", tool, "#{pane_pid}"))
    line = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv)
    started = time.perf_counter()
    tmux("send-keys", "-t", tool, line, "Enter")
    while FIRST_FRAME_MARKS[tool] not in tmux("capture-pane", "-p", "-t", tool):
        if time.perf_counter() - started > 20:
            screen = tmux("capture-pane", "-p", "-t", tool)
            tmux.kill()
            raise RuntimeError(f"{tool} drew no frame in 20 s:\n{screen}")
        time.sleep(0.01)
    return Running(tool, tmux, psutil.Process(pid), time.perf_counter() - started)


def measure(running: list[Running], seconds: float) -> list[Result]:
    """CPU and peak RSS of every tool over the same window, so a busy or throttled machine affects all alike."""
    time.sleep(2)  # let start-up work (imports, first layouts) finish before the window opens
    before = [r.cpu_s() for r in running]
    peaks = [0] * len(running)
    window_start = time.perf_counter()
    while time.perf_counter() - window_start < seconds:
        peaks = [max(peak, r.rss_bytes()) for peak, r in zip(peaks, running)]
        time.sleep(1)
    elapsed = time.perf_counter() - window_start
    return [
        Result(r.tool, 100 * (r.cpu_s() - cpu) / elapsed, peak, r.first_frame_s)
        for r, cpu, peak in zip(running, before, peaks)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measured window per tool")
    parser.add_argument("--tools-venv", type=Path, help="a venv that already has nvitop and gpustat")
    parser.add_argument("--only", choices=("gputop", "nvitop", "gpustat"), action="append", help="measure only these")
    args = parser.parse_args()
    tools = args.only or ["gputop", "nvitop", "gpustat"]
    with tempfile.TemporaryDirectory(prefix="gputop-tui-bench-") as name:
        tmp = Path(name)
        sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(GPU_PROCESSES)]
        try:
            state = tmp / "nvml-state.txt"
            write_state(state, training_box(GPUS, [p.pid for p in sleepers]))
            env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state), "TERM": "xterm-256color"}
            commands = {"gputop": [str(Path(sys.executable).with_name("gputop")), "-d", "1"]}
            if set(tools) - {"gputop"}:
                bin_dir = tools_venv(args.tools_venv, tmp) / "bin"
                commands["nvitop"] = [str(bin_dir / "nvitop"), "--interval", "1"]
                commands["gpustat"] = [str(bin_dir / "gpustat"), "-i", "1"]
            running: list[Running] = []
            try:
                for tool in tools:  # one at a time, so start-ups do not slow each other
                    running.append(launch(tool, commands[tool], env, tmp))
                results = measure(running, args.seconds)
            finally:
                for r in running:
                    r.tmux.kill()
        finally:
            for sleeper in sleepers:
                sleeper.kill()
                sleeper.wait()
    print(f"{GPUS} fake GPUs, {GPU_PROCESSES} GPU processes, 1 s interval, {args.seconds:g} s window, tmux 160x48\n")
    print("| tool | CPU (% of one core) | peak RSS | launch to first frame |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r.tool} | {r.cpu_percent:.2f} % | {r.rss_bytes / 2**20:.0f} MiB | {r.first_frame_s:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
