"""Probe reports with the step anatomy for processes that do not train, so the scale benchmarks watch training jobs
the way the dashboard meets them: each one read every tick, its report decoded, its view judged by the advisor.

The report is the real probe's, taken once from a real job (tests/training/scripts/anatomy.py under the probe:
its loaders, its tensors, its step with every phase and the FLOPs counted), then written for each chosen process
with that process's PID and start time, ``written_at`` renewed every ``interval_s`` as the probe renews its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ANATOMY = ROOT / "tests" / "training" / "scripts" / "anatomy.py"


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks, read as the training collector reads it to check a report."""
    sys.path.insert(0, str(ROOT))
    from gputop.collect.procinfo import main_thread_stat

    stat = main_thread_stat(pid)
    return None if stat is None else stat.start_ticks


def real_report(tmp: Path) -> dict[str, Any]:
    """The last report of a real job run under the probe for 40 steps of 30 ms (about 2 s)."""
    sys.path.insert(0, str(ROOT))
    from gputop.run.launch import probe_env

    directory = tmp / "template"
    directory.mkdir(mode=0o700)
    env = probe_env(dict(os.environ), str(directory), "benchmark")
    phases = ["--data-s", "0.004", "--forward-s", "0.008", "--backward-s", "0.01", "--optimizer-s", "0.004"]
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(ANATOMY), "--steps", "40", "--other-s", "0.004", *phases],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the template job failed: {done.stderr[-500:]}")
    [path] = directory.glob("*.json")
    report = json.loads(path.read_text())
    if not isinstance(report.get("step"), dict):
        raise RuntimeError("the template job's report has no step anatomy")
    return report


class Reporters:
    """Writes ``template`` as the report of each PID into ``directory`` every ``interval_s``, atomically, as the
    probe does, until closed. ``pids`` can be changed between writes (``watch``)."""

    def __init__(self, directory: Path, template: dict[str, Any], interval_s: float = 0.5) -> None:
        self.directory = directory
        self.template = template
        self.interval_s = interval_s
        self._pids: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reporters", daemon=True)
        self.directory.mkdir(mode=0o700, exist_ok=True)
        self._thread.start()

    def watch(self, pids: Iterable[int]) -> None:
        """Report for these PIDs from now on; the reports of the others are removed."""
        wanted = {pid: ticks for pid in pids if (ticks := start_ticks(pid)) is not None}
        with self._lock:
            for gone in set(self._pids) - set(wanted):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / f"{gone}.json").unlink()
            self._pids = wanted
        self._write()

    def _write(self) -> None:
        with self._lock:
            pids = dict(self._pids)
        now = time.time()
        for pid, ticks in pids.items():
            report = {**self.template, "pid": pid, "start_ticks": ticks, "written_at": now}
            temporary = self.directory / f".{pid}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(report, f)
            os.replace(temporary, self.directory / f"{pid}.json")

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def reporting(directory: Path, template: dict[str, Any]) -> Iterator[Reporters]:
    reporters = Reporters(directory, template)
    try:
        yield reporters
    finally:
        reporters.close()
