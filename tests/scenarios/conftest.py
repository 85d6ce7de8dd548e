"""Running the advisor's scenarios: real training jobs (scripts/job.py) watched by the real gputop, all at once.

Each scenario is a job with a chosen bottleneck, on the fake GPU it describes, watched either by
``gputop run --headless --report-json FILE --record RECORDING`` or, for a job started apart, by
``gputop report --pid --json``, with windows of a few seconds. The scenarios that the session selected start
together, each in its own processes (they spend most of their time asleep or waiting for a window to pass), in a
few waves, and each test reads its own result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gputop.run.launch import probe_env
from tests.factories import kill_family
from tests.fakenvml.build import build
from tests.fakenvml.state import FakeState, write_state
from tests.scenarios.gpu import SPEC_ENV, state_for
from tests.training.conftest import read_line

JOB = Path(__file__).parent / "scripts" / "job.py"
WINDOW_S = 3.0
TRAIN_S = 12.0
TIMEOUT_S = 400.0
"""A wave takes half a minute on an idle machine; on a busy one each job's start (importing torch) and end take
many times longer."""


@dataclass(frozen=True)
class Scenario:
    """A job (``job.py`` arguments), the fake GPU it runs on (``tests/scenarios/gpu.py``), and what the advisor
    must say: every id in ``raises``, and nothing outside ``raises`` and ``may``.

    Scenarios run in waves, each wave's together: those that keep the CPUs busy on purpose (wave 1) apart from
    those whose loops would then wait for a CPU, and few enough at once that they are not all importing torch
    on two cores while the first ones train."""

    name: str
    args: tuple[str, ...]
    raises: tuple[str, ...] = ()
    may: tuple[str, ...] = ()
    gpu: dict | None = None
    watch: str = "run"
    wave: int = 2
    check: Callable[[dict[str, dict]], None] | None = field(default=None, compare=False)


@dataclass
class Outcome:
    """What gputop printed about a scenario: its JSON document, and its stderr for failure messages."""

    document: dict | None
    stderr: str
    recording: Path | None = None
    """``gputop run --record``'s file: every snapshot the live advisor saw."""

    @property
    def advice(self) -> dict[str, dict]:
        return {a["id"]: a for a in (self.document or {}).get("advice", [])}


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def _environment(scenario: Scenario, home: Path) -> dict[str, str]:
    state = home / "nvml-state.txt"
    write_state(state, state_for(scenario.gpu, {}) if scenario.gpu else FakeState())
    probe = home / "probe"
    probe.mkdir(mode=0o700)
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(build("r550")),
        "FAKE_NVML_STATE": str(state),
        "GPUTOP_PROBE_DIR": str(probe),
        "PYTHONUNBUFFERED": "1",
    }
    if scenario.gpu:
        env[SPEC_ENV] = json.dumps(scenario.gpu)
    return env


def _job(scenario: Scenario, seconds: float) -> list[str]:
    return [sys.executable, "-W", "ignore", str(JOB), "--seconds", str(seconds), *scenario.args]


def _gputop(*args: str) -> list[str]:
    return [sys.executable, "-m", "gputop", *args, "--window", str(WINDOW_S)]


def run_scenario(scenario: Scenario, home: Path) -> Outcome:
    home.mkdir(parents=True)
    env = _environment(scenario, home)
    if scenario.watch == "run":
        out = home / "report.json"
        recording = home / "run.gputop"
        command = [
            *_gputop("run", "--headless", "-d", "1000", "--report-json", str(out), "--record", str(recording)),
            "--",
            *_job(scenario, TRAIN_S),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        return Outcome(json.loads(out.read_text()) if out.exists() else None, done.stderr, recording)
    job = subprocess.Popen(
        _job(scenario, TIMEOUT_S),  # until killed once the report is out, however long gputop takes to start
        env=probe_env(env, env["GPUTOP_PROBE_DIR"], "scenario"),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        read_line(job, "ready", timeout_s=TIMEOUT_S)
        command = _gputop("report", "--pid", str(job.pid), "--seconds", str(TRAIN_S), "--json")
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    finally:
        kill_family(job.pid)
        job.wait()
        job.stdout.close()
    return Outcome(json.loads(done.stdout) if done.returncode == 0 else None, done.stderr)


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """The outcome of every scenario the session selected, run wave by wave."""
    from tests.scenarios.test_scenarios import SCENARIOS

    wanted = {  # a scenario once, however many of its tests were selected
        item.callspec.params["name"]: SCENARIOS[item.callspec.params["name"]]
        for item in request.session.items
        if hasattr(item, "callspec") and item.callspec.params.get("name") in SCENARIOS
    }.values()
    root = tmp_path_factory.mktemp("scenarios")
    found: dict[str, Outcome] = {}
    for number in sorted({s.wave for s in wanted}):
        wave = [s for s in wanted if s.wave == number]
        with ThreadPoolExecutor(max_workers=max(1, len(wave))) as pool:
            futures = {s.name: pool.submit(run_scenario, s, root / s.name) for s in wave}
            found.update((name, future.result()) for name, future in futures.items())
    return found
