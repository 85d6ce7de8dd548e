"""Terminal escapes in other users' process names and command lines, and in the driver's strings, are shown as
text and never obeyed: ``--once``, ``--json`` and the dashboard in a real terminal (tmux)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import FakeDriver
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import h100
from tests.security.conftest import LocalUser
from tests.ui.test_tmux import Tmux, tmux  # noqa: F401

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
CSI8 = "\x9b31m"
HOSTILE_ARG = f"{TITLE}{CLEAR}{CSI8}--api\u202eyek"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")

# The shell renames itself (its comm, what `top` shows) with an escape and waits, holding "GPU memory"; the
# trailing `:` keeps it from exec-ing sleep, so the process with the hostile command line stays the shell.
HOSTILE_JOB = "printf '\\033[31mred\\007' > /proc/$$/comm; echo ready; sleep 300; :"


def _hostile_process(other_user: LocalUser) -> subprocess.Popen:
    args = ["bash", "-c", HOSTILE_JOB, "job", HOSTILE_ARG]
    proc = other_user.popen(args, stdout=subprocess.PIPE, text=True, cwd="/")
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _state(pid: int) -> FakeState:
    return FakeState(gpus=[h100(0, name=f"NVIDIA H100{TITLE}", processes=[FakeProcess(pid, 6 * 1024**3)])])


def _gputop_over_a_hostile_process(fake_driver: Callable[..., FakeDriver], other_user: LocalUser, *args: str) -> str:
    """What ``gputop ARGS`` prints while the second user's hostile process holds memory on a GPU."""
    job = _hostile_process(other_user)
    try:
        driver = fake_driver(_state(job.pid))
        return subprocess.run(
            [sys.executable, "-m", "gputop", *args], env=driver.env(), capture_output=True, text=True, check=True
        ).stdout
    finally:
        job.kill()
        job.wait()


def test_once_shows_escapes_in_another_users_command_line_and_never_writes_them(
    fake_driver: Callable[..., FakeDriver], other_user: LocalUser
) -> None:
    out = _gputop_over_a_hostile_process(fake_driver, other_user, "--once")
    assert not [c for c in RAW if c in out], repr(out)
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out  # the command line, with its escapes made visible
    assert "\\u202e" in out
    assert "NVIDIA H100\\x1b]0;pwned" in out  # the driver's GPU name


def test_json_carries_the_visible_form_not_the_control_characters(
    fake_driver: Callable[..., FakeDriver], other_user: LocalUser
) -> None:
    out = _gputop_over_a_hostile_process(fake_driver, other_user, "--once", "--json")
    document = json.loads(out)
    (process,) = document["processes"]
    assert process["command"].endswith("\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\\x9b31m--api\\u202eyek")
    assert not [c for c in RAW if c in process["command"]]
    assert not [c for c in RAW if c in document["gpus"][0]["name"]]


def test_the_dashboard_in_a_real_terminal_shows_the_escapes_and_keeps_its_title(
    fake_driver: Callable[..., FakeDriver],
    other_user: LocalUser,
    tmux: Tmux,  # noqa: F811
) -> None:
    job = _hostile_process(other_user)
    try:
        driver = fake_driver(_state(job.pid))
        tmux.start_gputop("--readonly", env={k: v for k, v in driver.env().items() if k != "PYTHONUNBUFFERED"})
        # The GPU's name in its panel, the command line in the process's row (a later frame on a busy machine), in
        # the dashboard itself (its footer): the plain first frame before it shows both too, but takes no keys.
        tmux.wait_until(
            lambda s: "\\x1b]0;pwned" in s and "bash -c printf" in s and "⏎ Details" in s,
            "the dashboard with the GPU and the process's row",
        )
        tmux.run("send-keys", "-t", "gputop", "Enter")
        # The detail screen: the process's name in its title, its whole command line with the escapes as text.
        tmux.wait_until(lambda s: "x1b[31mred" in s and "\\x1b[2J" in s, "the process's name and arguments")
        assert tmux.run("display-message", "-p", "-t", "gputop", "#{pane_title}").strip() != "pwned"
        tmux.run("send-keys", "-t", "gputop", "q")
    finally:
        job.kill()
        job.wait()


def test_a_command_line_of_megabytes_is_cut_to_what_any_real_one_needs(
    fake_driver: Callable[..., FakeDriver],
) -> None:
    from gputop.collect.host import MAX_COMMAND_CHARS

    job = subprocess.Popen(
        ["bash", "-c", "echo ready; sleep 300; :", "job", *(["y" * 100_000] * 10)], stdout=subprocess.PIPE
    )
    try:
        assert job.stdout is not None and job.stdout.readline() == b"ready\n"
        driver = fake_driver(_state(job.pid))
        out = subprocess.run(
            [sys.executable, "-m", "gputop", "--once", "--json"], env=driver.env(), capture_output=True, check=True
        ).stdout
    finally:
        job.kill()
        job.wait()
    (process,) = json.loads(out)["processes"]
    assert MAX_COMMAND_CHARS < len(process["command"]) < MAX_COMMAND_CHARS + 100
    assert process["command"].endswith("more characters)")
