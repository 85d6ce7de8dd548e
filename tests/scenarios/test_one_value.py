"""One data-starved job, one num_workers: every surface that shows the advisor's suggestion gives the value its
window gives.

A real job (one worker, 8 samples × 8 ms asleep a batch, 16 ms of the loop's own work a step) runs under
``gputop run --headless --record --report-json`` with a 3 s window. The recording holds every snapshot the run's
advisor saw, so everything read back from it (``gputop report FILE`` as text and JSON, the replayed dashboard's
advice panel and training screen, the exporter's advisor and metrics) must give exactly the run's value. While it
runs, ``gputop report --pid`` and ``gputop export`` watch it with advisors of their own, over windows of their
own: those agree with it within the measurement's noise (a quarter, or one worker).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor import thresholds as th
from gputop.export.metrics import advice_families
from gputop.store import open_recording
from gputop.ui.replay.app import replay_app
from gputop.ui.replay.player import ReplayPlayer
from gputop.ui.replay.source import ReplaySource
from gputop.ui.screens.training import TrainingScreen
from gputop.ui.widgets.advice_panel import AdvicePanel
from tests.export.conftest import Exporter
from tests.factories import kill_family, settle, wait_until
from tests.fakenvml.build import build
from tests.fakenvml.state import write_state
from tests.machines import GIB
from tests.scenarios.conftest import JOB
from tests.scenarios.gpu import SPEC_ENV, state_for
from tests.training.conftest import read_line

WINDOW_S = "3"
TIMEOUT_S = 240
RULE = "data-starved"
SUGGESTED = re.compile(r"num_workers=(\d+)")
GPU = {"util_gpu": 20, "gpm_sm_util": 10.0, "memory_used": 10 * GIB, "process_gib": 9}
"""A GPU the job keeps busy a fifth of the time: starved, as its loop is."""


@dataclass
class Watched:
    """What the surfaces said about the job."""

    report_json: dict
    stderr: str
    recording: Path
    report_pid: dict
    exported: int
    pid: int
    home: Path


def gputop(*args: str) -> list[str]:
    return [sys.executable, "-m", "gputop", *args]


def environment(home: Path) -> dict[str, str]:
    """The fake driver with one GPU, which the job joins at its first batch: the exporter watches the processes
    on the machine's GPUs."""
    state = home / "nvml-state.txt"
    write_state(state, state_for(GPU, {}))
    probe = home / "probe"
    probe.mkdir(mode=0o700)
    return {
        **os.environ,
        "LD_LIBRARY_PATH": str(build("r550")),
        "FAKE_NVML_STATE": str(state),
        "GPUTOP_PROBE_DIR": str(probe),
        "PYTHONUNBUFFERED": "1",
        SPEC_ENV: json.dumps(GPU),
    }


def start_exporter(env: dict[str, str]) -> Exporter:
    argv = gputop("export", "--listen", "127.0.0.1:0", "--per-process", "--window", WINDOW_S, "-d", "0.375")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stderr.readline() if proc.stderr is not None else ""
    return Exporter(proc, line.strip())


def exported_value(exporter: Exporter, pid: int) -> int | None:
    wanted = {"id": RULE, "pid": str(pid), "setting": "num_workers"}
    found = [s.value for s in exporter.samples() if s.name == "gputop_advice_suggested_value" and s.labels == wanted]
    return int(found[0]) if found else None


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    """The job run once under ``gputop run``, watched meanwhile by ``gputop report --pid`` and ``gputop export``;
    it trains until both have given their value (then a stop file ends it), at most two minutes."""
    home = tmp_path_factory.mktemp("one-value")
    env = environment(home)
    stop = home / "stop"
    job = [sys.executable, "-W", "ignore", str(JOB), "--seconds", "120", "--until-file", str(stop), "--workers", "1"]
    job += ["--persistent", "--batch-size", "8", "--item-sleep-s", "0.008", "--step-sleep-s", "0.016"]
    recording, report = home / "run.gputop", home / "report.json"
    argv = gputop("run", "--headless", "--window", WINDOW_S, "--no-history", "--record", str(recording))
    argv += ["--report-json", str(report), "--", *job]
    run = subprocess.Popen(
        argv, env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    exporter = start_exporter(env)
    try:
        read_line(run, "ready", timeout_s=TIMEOUT_S)
        pid = wait_until(lambda: next((c.pid for c in psutil.Process(run.pid).children()), None), "the job")
        live = subprocess.run(
            gputop("report", "--pid", str(pid), "--seconds", "6", "--window", WINDOW_S, "--json"),
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert live.returncode == 0, live.stderr
        exported = wait_until(lambda: exported_value(exporter, pid), "the exporter's suggestion", TIMEOUT_S)
        stop.touch()
        _, stderr = run.communicate(timeout=TIMEOUT_S)
        assert run.returncode == 0, stderr[-2000:]
    finally:
        exporter.stop()
        if run.poll() is None:
            kill_family(run.pid)
            run.communicate()
    yield Watched(json.loads(report.read_text()), stderr, recording, json.loads(live.stdout), exported, pid, home)


def suggested(document: dict) -> int:
    """The num_workers ``data-starved`` suggests in a report document (``--report-json``, ``report --json``)."""
    found = [a for a in document["advice"] if a["id"] == RULE]
    assert len(found) == 1, document["advice"]
    return int(found[0]["suggest"]["num_workers"])


def said(text: str) -> set[int]:
    """Every num_workers a text names."""
    return {int(n) for n in SUGGESTED.findall(text)}


def test_the_run_says_one_value_in_its_report_and_in_its_headless_lines(watched: Watched) -> None:
    value = suggested(watched.report_json)

    assert value > 1
    assert said(watched.stderr) == {value}, watched.stderr


def test_a_report_of_the_recording_gives_the_runs_value(watched: Watched) -> None:
    as_json = subprocess.run(
        gputop("report", str(watched.recording), "--json"), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    as_text = subprocess.run(gputop("report", str(watched.recording)), capture_output=True, text=True)

    value = suggested(watched.report_json)
    assert suggested(json.loads(as_json.stdout)) == value
    assert said(as_text.stdout) == {value}, as_text.stdout


def test_the_exporters_advisor_over_the_recording_gives_the_runs_value(watched: Watched) -> None:
    with open_recording(watched.recording) as recording:
        advisor = Advisor(None, AdvisorConfig(window_s=float(WINDOW_S)))  # gputop export --window 3
        exported = None
        for snap in recording:
            metrics = advice_families(advisor.update(snap), per_process=True)
            values = [s.value for f in metrics for s in f.samples if s.labels.get("setting") == "num_workers"]
            exported = int(values[0]) if values else exported

    assert exported == suggested(watched.report_json)


def lines(panel: AdvicePanel) -> str:
    return "\n".join(strip.text for strip in panel.drawn_lines())


async def test_the_replayed_dashboard_and_training_screen_show_the_runs_value(watched: Watched) -> None:
    value = suggested(watched.report_json)
    with open_recording(watched.recording) as recording:
        player = ReplayPlayer(ReplaySource(recording), play=False)
        app = replay_app(player)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot, lambda: player.findings is not None, "the findings computed")
            findings = player.findings
            assert findings is not None
            starved = [i for i in range(len(player.source)) if any(a.id == RULE for a in findings.at(i))]
            assert starved, "the replay never shows the finding the run gave"
            player.go(starved[-1])
            await settle(pilot, lambda: said(lines(app.screen.query_one(AdvicePanel))), "the finding on screen")
            assert said(lines(app.screen.query_one(AdvicePanel))) == {value}
            await pilot.press("l")
            await settle(pilot, lambda: isinstance(app.screen, TrainingScreen), "the training screen")
            await pilot.pause()
            assert said(lines(app.screen.query_one(AdvicePanel))) == {value}


def test_live_watchers_of_their_own_windows_agree_within_the_noise(watched: Watched) -> None:
    value = suggested(watched.report_json)
    noise = max(1, th.WORKERS_NOISE * value)

    assert abs(suggested(watched.report_pid) - value) <= noise, (watched.report_pid, value)
    assert abs(watched.exported - value) <= noise, (watched.exported, value)
