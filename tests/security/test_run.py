"""`gputop run` against a hostile machine: planted symlinks, signals sent every way, gputop killed, commands
that cannot run, a report directory taken by another user. Real `gputop run` processes around real jobs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import wait_until
from tests.training.conftest import SCRIPTS, read_line, run_in_terminal

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GPUTOP_RUN = [sys.executable, "-m", "gputop", "run"]
PYTHON = [sys.executable, "-W", "ignore"]

# Counts the SIGINTs it gets; after the first it waits for more, writes the count to argv[1] and exits 40 + count.
# It says when it is continued after a stop.
COUNT_SIGINTS = """
import os, signal, sys, time
seen = []
signal.signal(signal.SIGINT, lambda *_: seen.append(1))
signal.signal(signal.SIGCONT, lambda *_: print("continued", flush=True))
print("ready", os.getpid(), flush=True)
while not seen:
    time.sleep(0.01)
time.sleep(1.5)
with open(sys.argv[1], "w") as f:
    f.write(str(len(seen)))
sys.exit(40 + len(seen))
"""


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    path = tmp_path / "count_sigints.py"
    path.write_text(COUNT_SIGINTS)
    return path


@pytest.fixture
def env(probe_dir: Path) -> dict[str, str]:
    return {**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir)}


@pytest.fixture(params=[0o1777, 0o777], ids=["sticky", "open"])
def shared_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory every user can write to, as /tmp is (sticky) or as a careless share is (not sticky); made
    outside pytest's private temporary tree so that the other user can reach it."""
    path = Path(tempfile.mkdtemp(prefix="gputop-shared-", dir="/tmp"))
    path.chmod(request.param)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start(args: list[str], env: dict[str, str], **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen(
        [*GPUTOP_RUN, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for a parent that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# -- files: --report-json and the job's log never write through a planted name ---------------------------------


def test_report_json_is_not_written_through_a_symlink_planted_for_its_temporary_file(
    shared_dir: Path, other_user, tmp_path: Path, env: dict[str, str]
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    report = shared_dir / "r.json"
    proc = start(
        ["--headless", "--report-json", str(report), "--", *PYTHON, "-c", "import sys; sys.stdin.readline()"],
        env,
        stdin=subprocess.PIPE,
    )
    # The other user knows gputop's PID (ps) while the job runs, and plants the name it used to write first.
    other_user.run(["ln", "-s", str(victim), str(shared_dir / f"r.json.{proc.pid}.tmp")])
    _, err = proc.communicate("go\n", timeout=60)

    assert proc.returncode == 0, err
    assert victim.read_text() == "precious\n"
    assert not report.is_symlink()
    assert json.loads(report.read_text())["exit_code"] == 0
    assert stat.S_IMODE(report.stat().st_mode) == 0o600, "the report holds the command line"
    assert [p.name for p in shared_dir.iterdir() if p.name.startswith(".")] == [], "no temporary file left"


def test_the_jobs_log_is_a_new_file_not_one_planted_at_its_name(probe_dir: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    # gputop's PID names the log: plant it from the process that then becomes gputop (exec keeps the PID).
    code = (
        "import os, sys, types\n"
        f"os.symlink({str(victim)!r}, os.path.join({str(probe_dir)!r}, f'run-{{os.getpid()}}.log'))\n"
        "app = types.ModuleType('gputop.ui.app')\n"
        "app.run_dashboard = lambda feed, **kw: 0\n"
        "sys.modules['gputop.ui.app'] = app\n"
        "from gputop.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--", *PYTHON, "-c", "print('job output')"],
        env={**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"
    log = probe_dir / f"run-{proc.stderr.split('run-')[1].split('.log')[0]}.log"
    assert not log.is_symlink()
    assert log.read_text() == "job output\n"


# -- signals: each reaches the job once, however it is sent; the job dies with gputop ---------------------------


def test_sigint_sent_to_gputops_process_group_reaches_the_job_once(
    env: dict[str, str], tmp_path: Path, counter: Path
) -> None:
    count = tmp_path / "count"
    # Its own session, as under Slurm or systemd: kill -INT -- -PGID signals gputop and everything in its group.
    proc = start(["--headless", "--", *PYTHON, str(counter), str(count)], env, start_new_session=True)
    read_line(proc, "ready")

    os.killpg(proc.pid, signal.SIGINT)

    _, err = proc.communicate(timeout=60)
    assert count.read_text() == "1", err
    assert proc.returncode == 41


def test_sigint_sent_to_gputop_alone_reaches_the_job_once(env: dict[str, str], tmp_path: Path, counter: Path) -> None:
    count = tmp_path / "count"
    proc = start(["--headless", "--", *PYTHON, str(counter), str(count)], env, start_new_session=True)
    read_line(proc, "ready")

    os.kill(proc.pid, signal.SIGINT)

    _, err = proc.communicate(timeout=60)
    assert count.read_text() == "1", err
    assert proc.returncode == 41


def test_ctrl_c_at_the_terminal_reaches_the_job_once(env: dict[str, str], tmp_path: Path, counter: Path) -> None:
    count = tmp_path / "count"
    argv = [*GPUTOP_RUN, "--headless", "--", *PYTHON, str(counter), str(count)]

    code, output = run_in_terminal(argv, env, [(b"ready", b"\x03")])

    assert count.read_text() == "1", output
    assert code == 41


def test_ctrl_z_stops_the_job_with_gputop_and_fg_resumes_both(
    env: dict[str, str], tmp_path: Path, counter: Path
) -> None:
    # A shell with job control: Ctrl-Z hands the terminal back to it, fg gives it to the job again.
    count = tmp_path / "count"
    run = " ".join([*GPUTOP_RUN, "--headless", "--", *PYTHON, str(counter), str(count)])
    script = f"set -m; {run}; echo stopped=$?; fg >/dev/null; echo exit=$?"

    code, output = run_in_terminal(
        # Ctrl-C once the job runs again: it must reach the job, not the shell that has not yet run fg.
        ["/bin/bash", "--norc", "-c", script],
        env,
        [(b"ready", b"\x1a"), (b"continued", b"\x03")],
    )

    assert b"stopped=148" in output, output  # 128 + SIGTSTP, as the shell reports a stopped job
    assert b"exit=41" in output, output
    assert count.read_text() == "1"
    assert code == 0


def test_ctrl_z_with_no_shell_to_continue_them_leaves_neither_stopped(
    env: dict[str, str], tmp_path: Path, counter: Path
) -> None:
    # gputop leads the terminal's session itself: no shell could run fg, and the kernel does not stop an orphaned
    # group. The job must go on at once, not wait stopped for a continue that never comes.
    count = tmp_path / "count"
    argv = [*GPUTOP_RUN, "--headless", "--", *PYTHON, str(counter), str(count)]

    code, output = run_in_terminal(argv, env, [(b"ready", b"\x1a"), (b"continued", b"\x03")])

    assert count.read_text() == "1", output
    assert code == 41


def test_a_job_that_reads_the_terminal_can(env: dict[str, str]) -> None:
    job = "import sys; print('ready', flush=True); print('read', sys.stdin.readline().strip(), flush=True)"

    code, output = run_in_terminal([*GPUTOP_RUN, "--headless", "--", *PYTHON, "-c", job], env, [(b"ready", b"hi\n")])

    assert b"read hi" in output, output
    assert code == 0


def test_gputop_killed_takes_the_job_with_it(env: dict[str, str], counter: Path) -> None:
    proc = start(["--headless", "--", *PYTHON, str(counter), "/dev/null"], env, start_new_session=True)
    job = int(read_line(proc, "ready").split()[1])
    try:
        proc.kill()
        proc.wait()

        wait_until(lambda: gone(job), "the job's end with gputop's")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(job, signal.SIGKILL)


def test_a_detached_job_outlives_gputop(env: dict[str, str], counter: Path) -> None:
    proc = start(["--headless", "--detach", "--", *PYTHON, str(counter), "/dev/null"], env, start_new_session=True)
    job = int(read_line(proc, "ready").split()[1])
    try:
        proc.kill()
        proc.wait()
        time.sleep(1.0)

        assert not gone(job)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(job, signal.SIGKILL)


# -- commands that cannot run: the shell's exit codes and one line, no traceback --------------------------------


@pytest.mark.parametrize(
    ("content", "mode", "code", "reason"),
    [
        ("echo no shebang\n", 0o755, 126, "Exec format error"),
        ("#!/bin/sh\necho hi\n", 0o644, 126, "Permission denied"),
        (None, 0o755, 126, "Permission denied"),  # a directory
        ("#!/no/such/interpreter\n", 0o755, 127, "No such file or directory"),
    ],
    ids=["no-shebang", "not-executable", "directory", "missing-interpreter"],
)
def test_a_command_that_cannot_run_exits_as_a_shell_says(
    tmp_path: Path, env: dict[str, str], content: str | None, mode: int, code: int, reason: str
) -> None:
    command = tmp_path / "job"
    if content is None:
        command.mkdir()
    else:
        command.write_text(content)
    command.chmod(mode)

    proc = subprocess.run([*GPUTOP_RUN, "--headless", "--", str(command)], env=env, capture_output=True, text=True)

    assert proc.returncode == code
    assert proc.stderr == f"gputop: cannot run {command}: {reason}\n"


def test_a_missing_command_is_127_in_one_line(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [*GPUTOP_RUN, "--headless", "--", "no-such-command-here"], env=env, capture_output=True, text=True
    )

    assert proc.returncode == 127
    assert proc.stderr == "gputop: cannot run no-such-command-here: No such file or directory\n"


# -- the report directory: another user cannot turn the reports off ---------------------------------------------


@pytest.mark.parametrize("planted", ["directory", "file"])
def test_a_report_directory_taken_by_another_user_falls_back_to_a_private_one(
    shared_dir: Path, other_user, planted: str
) -> None:
    taken = shared_dir / f"gputop-{os.geteuid()}"
    other_user.run(["mkdir", "-m", "755", str(taken)] if planted == "directory" else ["touch", str(taken)])
    env = {k: v for k, v in os.environ.items() if k not in ("GPUTOP_PROBE_DIR", "XDG_RUNTIME_DIR")}
    env["TMPDIR"] = str(shared_dir)
    job = [*PYTHON, str(SCRIPTS / "train.py"), "--epochs", "1"]

    proc = subprocess.run(
        [*GPUTOP_RUN, "--headless", "--report-json", "-", "--", *job],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    notice = next(line for line in proc.stderr.splitlines() if "probe reports go to" in line)
    assert str(taken) in notice
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [v["probe"]["status"] for v in doc["training"]] == ["ok"]
    assert (taken.stat().st_uid, taken.is_dir()) == (other_user.uid, planted == "directory"), "theirs, untouched"
    assert sorted(p.name for p in shared_dir.iterdir()) == [taken.name], "the private directory is removed"
