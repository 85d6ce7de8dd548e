"""The real ``gputop`` command in a real terminal (tmux), over the fake driver and real processes."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.factories import DEADLINE_S, wait_until
from tests.fakenvml.build import build
from tests.fakenvml.state import FakeProcess, FakeState, write_state
from tests.machines import h100
from tests.ui.conftest import TrainingJob

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def gputop_command() -> list[str]:
    script = Path(sys.executable).with_name("gputop")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gputop"]


class Tmux:
    """A private tmux server (its own socket), so the test never touches the user's sessions."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], check=True, capture_output=True, text=True
        ).stdout

    def start_gputop(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        status: Path | None = None,
        size: tuple[int, int] = (120, 40),
    ) -> None:
        """Type ``gputop ARGS`` (with ``env`` and TERM=xterm-256color) into a shell in a new window of ``size``;
        its exit status goes to ``status``. A shell first: the pane has its final size before gputop asks for it."""
        variables = {"TERM": "xterm-256color", **(env or {})}
        words = [
            "env",
            *(f"{k}={shlex.quote(v)}" for k, v in variables.items()),
            *map(shlex.quote, gputop_command()),
            *map(shlex.quote, args),
        ]
        if status is not None:
            words.append(f"; echo $? > {shlex.quote(str(status))}")
        width, height = size
        self.run("new-session", "-d", "-s", "gputop", "-x", str(width), "-y", str(height), "bash --norc --noprofile")
        self.run("send-keys", "-t", "gputop", " ".join(words), "Enter")

    @staticmethod
    def exit_status(status: Path) -> str:
        """The exit status ``start_gputop`` wrote to ``status``, once gputop has exited."""
        wait_until(status.exists, "gputop's exit")
        return status.read_text().strip()

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "gputop")

    def wait_for(self, text: str, timeout_s: float = DEADLINE_S) -> str:
        return self.wait_until(lambda screen: text in screen, f"{text!r} on screen", timeout_s)

    def wait_until(self, condition: Callable[[str], bool], what: str, timeout_s: float = DEADLINE_S) -> str:
        """The screen once ``condition`` holds for it; fails the test with the last screen after ``timeout_s``."""

        def matched() -> str | None:
            screen = self.screen()
            return screen if condition(screen) else None

        return wait_until(matched, what, timeout_s, every_s=0.1, last=self.screen)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path / "tmux.sock")
    yield server
    subprocess.run(["tmux", "-S", str(server.socket), "kill-server"], capture_output=True)


def test_gputop_draws_in_tmux_and_q_quits(tmp_path: Path, tmux: Tmux, training_job: TrainingJob) -> None:
    pid = training_job.parent.pid
    state = tmp_path / "nvml-state.txt"
    write_state(state, FakeState(gpus=[h100(0, processes=[FakeProcess(pid, 6 << 30)]), h100(1)]))
    status = tmp_path / "exit-status"
    env = {"LD_LIBRARY_PATH": str(build("r550")), "FAKE_NVML_STATE": str(state)}
    tmux.start_gputop("-d", "0.5", env=env, status=status)

    screen = tmux.wait_for("NVIDIA H100")
    screen = tmux.wait_for(str(pid))
    assert "driver 550.90.07" in screen
    assert "CUDA 12.4" in screen
    screen = tmux.wait_for(f"Training · PID {pid}")  # it owns DataLoader workers, and writes no probe report
    assert "probe none" in screen

    tmux.run("send-keys", "-t", "gputop", "t")
    screen = tmux.wait_until(lambda screen: screen.count("pt_data_worker") == 2, "the tree with both workers")
    assert "└─ pt_data_worker" in screen
    assert len(screen.splitlines()[0]) > 100

    # A lone Esc is told from the start of a sequence only by the parser's timeout: the input thread, which
    # sleeps until a key comes, must wake for that deadline too (gputop/ui/terminal.py)
    tmux.run("send-keys", "-t", "gputop", "?")
    tmux.wait_for("Esc, q or ? closes")
    tmux.run("send-keys", "-t", "gputop", "Escape")
    tmux.wait_until(lambda screen: "Esc, q or ? closes" not in screen, "the help closed by a lone Esc")

    tmux.run("resize-window", "-t", "gputop", "-x", "80", "-y", "24")
    tmux.wait_until(lambda screen: max(map(len, screen.splitlines())) <= 80, "a redraw at 80 columns")

    tmux.run("send-keys", "-t", "gputop", "q")
    assert tmux.exit_status(status) == "0"
