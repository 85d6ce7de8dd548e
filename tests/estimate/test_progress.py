"""The estimate's progress: one line on a terminal's stderr while it runs (which batch is tried, what the one
before needs), erased before the result; nothing on a pipe, nothing with ``--json``."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from gputop.estimate.parts import BatchEstimate, Parts
from gputop.estimate.progress import Progress, progress_line
from tests.estimate.helpers import ROOT
from tests.factories import wait_until
from tests.ui.test_tmux import Tmux, gputop_command, tmux  # noqa: F401 (the fixture)

MIB, GIB = 1024**2, 1024**3
GATED = "tests.estimate.cli_models:gated"
MLP = "tests.estimate.cli_models:mlp"


def needed(batch_size: int, nvml_bytes: int, fits: bool | None) -> BatchEstimate:
    parts = Parts(weights=MIB)
    return BatchEstimate(batch_size, parts, parts, MIB, MIB, 2 * MIB, nvml_bytes, fits)


@pytest.mark.fast
def test_the_line_names_the_batch_tried_and_what_the_one_before_needs():
    line = progress_line(Progress("search", 1536, needed(1024, 40 * GIB, False)))
    assert line == "largest batch that fits: trying 1536… · batch 1024 needs 40.0GiB, too large"
    assert len(line) < 80


@pytest.mark.fast
def test_the_first_estimate_has_nothing_before_it_and_without_a_gpu_size_no_verdict():
    assert progress_line(Progress("asked", 8, None)) == "estimating batch 8…"
    assert (
        progress_line(Progress("asked", 16, needed(8, 3 * GIB, None))) == "estimating batch 16… · batch 8 needs 3.00GiB"
    )


def exit_status(path: Path) -> str:
    """gputop's exit status as the shell in tmux writes it to ``path``, once it is there (two minutes at most)."""
    return wait_until(lambda: path.exists() and path.read_text().strip(), "gputop's exit status", timeout_s=120)


def on_terminal_stderr(*args: str, timeout_s: float = 120) -> tuple[int, str, bytes]:
    """``gputop estimate ARGS`` with its stderr on a new pseudo-terminal and its stdout on a pipe: its exit status,
    its stdout, and every byte it wrote to the terminal."""
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*gputop_command(), "estimate", *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    terminal = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the process is gone and with it the terminal's last user
                    break
                if not chunk:
                    break
                terminal += chunk
        assert proc.stdout is not None
        stdout = proc.stdout.read().decode()
        return proc.wait(timeout=10), stdout, terminal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        os.close(master)


def test_with_json_a_terminal_gets_no_progress():
    status, stdout, terminal = on_terminal_stderr(MLP, "--input", "64", "--memory", "1GiB", "--json")
    assert status == 0
    assert stdout.startswith("{")
    assert terminal == b""


def test_a_pipe_gets_no_progress():
    result = subprocess.run(
        [*gputop_command(), "estimate", MLP, "--input", "64", "--memory", "1GiB"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "largest batch that fits: " in result.stdout
    assert result.stderr == ""


def test_on_a_terminal_the_search_shows_the_batch_it_tries_then_erases_the_line(tmp_path: Path, tmux: Tmux):  # noqa: F811
    gate, status = tmp_path / "gate", tmp_path / "status"
    env = {"GPUTOP_TEST_GATE": str(gate), "PYTHONPATH": str(ROOT)}
    tmux.start_gputop("estimate", GATED, "--memory", "1GiB", env=env, status=status, size=(80, 24))
    screen = tmux.wait_for("largest batch that fits: trying 2…", timeout_s=120)  # held at the gate
    assert "· batch 1 needs 514MiB, fits" in screen
    gate.touch()
    assert exit_status(status) == "0"
    screen = tmux.screen()
    assert "largest batch that fits: " in screen
    assert "trying" not in screen
    assert "…" not in screen


def test_ctrl_c_erases_the_line_and_says_the_estimate_was_interrupted(tmp_path: Path, tmux: Tmux):  # noqa: F811
    status = tmp_path / "status"
    env = {"GPUTOP_TEST_GATE": str(tmp_path / "never"), "PYTHONPATH": str(ROOT)}
    tmux.start_gputop("estimate", GATED, "--memory", "1GiB", env=env, status=status, size=(80, 24))
    tmux.wait_for("largest batch that fits: trying 2…", timeout_s=120)
    tmux.run("send-keys", "-t", "gputop", "C-c")
    screen = tmux.wait_for("gputop: interrupted (KeyboardInterrupt): no estimate", timeout_s=120)
    assert "trying" not in screen
    assert "^C" not in screen, "the terminal's echo of Ctrl-C is erased with the line"
    assert exit_status(status) == "130"
