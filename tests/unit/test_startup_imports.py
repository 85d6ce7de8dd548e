"""What a start of gputop imports, and when: ``--once`` takes its first GPM sample before the host side and the
training collector are imported (their imports then fall inside its measuring window), it imports neither the
probe's patching nor the memory estimator, and the command line is built without the estimator."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gputop.cli import watch
from gputop.collect import sampler
from gputop.collect.sampler import RATE_WINDOW_S, SnapshotMaker
from tests.conftest import FakeDriver
from tests.machines import training_box

ROOT = Path(__file__).resolve().parents[2]

LATER = (
    "psutil",
    "logging",
    "gputop.collect.host",
    "gputop.collect.training",
    "gputop.probe",
    "gputop.document",
    "pathlib",
    "gputop.collect.slurm",
    "http.client",
    "ssl",
)
"""Modules ``gputop --once --json`` imports only after its first NVML read, if at all (Slurm's module, with its
subprocess and socket, only inside an allocation; the API server's HTTP and TLS only when it is asked)."""

AT_ALL = ("gputop.table", "gputop.document", "gputop.probe.hooks", "multiprocessing", "gputop.estimate.api", "logging")
"""Of these, ``gputop --once --json`` imports only the JSON document: not the table, not the probe's patching
(which the job being watched runs, not the monitor), not the memory estimator, not ``logging`` (4 ms, which the
collectors import only to report a fault)."""

ONCE = f"""
import sys
before = set(sys.modules)  # what the interpreter's start loaded (site hooks, an editable install's finder)
from gputop.collect.nvml import NvmlCollector
read, seen = NvmlCollector.read, []
def first_read(self, slow):
    if not seen:
        seen.append([m for m in {LATER!r} if m in sys.modules and m not in before])
    return read(self, slow)
NvmlCollector.read = first_read
from gputop.cli import main
status = main(sys.argv[1:])
print(seen[0], [m for m in {AT_ALL!r} if m in sys.modules and m not in before], file=sys.stderr)
sys.exit(status)
"""


def test_once_imports_the_host_side_and_the_writer_after_its_first_gpm_sample(
    fake_driver: Callable[..., FakeDriver],
) -> None:
    driver = fake_driver(training_box(2, []))
    result = subprocess.run(
        [sys.executable, "-c", ONCE, "--once", "--json"],
        capture_output=True,
        text=True,
        env=driver.env(),
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert len(json.loads(result.stdout)["gpus"]) == 2
    assert result.stderr.strip().splitlines()[-1] == "[] ['gputop.document']"


def test_building_the_whole_command_line_imports_no_estimator() -> None:
    """Only the estimate's lazy package face and the defaults its options show."""
    code = (
        "import sys; from gputop.cli import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m == 'gputop.estimate' or m.startswith('gputop.estimate.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "['gputop.estimate', 'gputop.estimate.defaults']"


PLAIN_FIRST = """
import sys
from gputop.cli import watch
show = watch.first_frame
def spy(snap):
    show(snap)
    print("|textual imported:", "textual" in sys.modules, flush=True)
    raise SystemExit(0)
watch.first_frame = spy
from gputop.cli import main
sys.exit(main([]))
"""


def test_the_dashboard_prints_its_first_snapshot_before_importing_textual(
    fake_driver: Callable[..., FakeDriver],
) -> None:
    """On a terminal the GPUs are on screen, as the plain table, while Textual is still to be imported."""
    driver = fake_driver(training_box(2, []))
    leader, follower = pty.openpty()
    env = {**driver.env(), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "8"}
    process = subprocess.Popen([sys.executable, "-c", PLAIN_FIRST], stdout=follower, env=env, cwd=ROOT)
    os.close(follower)
    screen = b""
    with contextlib.suppress(OSError):  # the pty's end reads as EIO once the process has exited
        while chunk := os.read(leader, 65536):
            screen += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0
    frame, _, after = screen.decode().partition("|")
    assert frame.startswith(watch.ENTER_ALTERNATE_SCREEN) and "NVIDIA H100" in frame
    assert all(len(line) <= 100 for line in frame.splitlines()) and len(frame.splitlines()) <= 7
    assert after.strip() == "textual imported: False"


class Recorder:
    """Stands for the three collectors: notes when each call came, reads nothing."""

    def __init__(self, events: list[tuple[str, float]]) -> None:
        self.events = events
        self.notices: list[str] = []
        self.driver = None
        self.nested_pid_namespace = False

    def note(self, name: str) -> None:
        self.events.append((name, time.monotonic()))

    def start(self) -> None:
        self.note("start")

    def read(self, slow: bool, *args: Any) -> Any:
        self.note("read")
        return ([], []) if not args else ()

    def related(self, roots: object) -> set[int]:
        return set()

    def prime(self, pids: object) -> None:
        self.note("prime")

    def host_info(self) -> None:
        self.note("host_info")

    def settle(self) -> None:
        self.note("settle")

    def processes(self, pids: object) -> dict[int, Any]:
        self.note("processes")
        return {}

    def new_pids(self) -> set[int]:
        return set()


@pytest.mark.fast
def test_one_shot_runs_the_callers_start_up_in_its_window_and_keeps_the_cpu_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[tuple[str, float]] = []
    parts = Recorder(events)
    monkeypatch.setattr(sampler, "Snapshot", lambda **fields: SimpleNamespace(**fields))
    maker = SnapshotMaker(nvml=parts, host=parts, training=parts)  # type: ignore[arg-type]
    # the caller's start-up takes longer than the GPM window: the CPU windows still last RATE_WINDOW_S
    maker.one_shot(window_s=0.05, during=lambda: (events.append(("during", time.monotonic())), time.sleep(0.08)))
    names = [name for name, _ in events]
    assert names[:2] == ["start", "read"] and names.index("during") < names.index("processes")
    primed = next(at for name, at in events if name == "host_info")  # the last CPU window to start
    final = [at for name, at in events if name == "read"][-1]
    assert final - primed >= RATE_WINDOW_S
