"""`gputop run`: the real command line around real jobs: exit codes, signals, the probe in every process."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.training.conftest import SCRIPTS, read_line, run_in_terminal

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PYTHON = [sys.executable, "-W", "ignore"]


def gputop_run(*args: str, probe_dir: Path, env: dict[str, str] | None = None, preamble: str = "", **kwargs):
    """Start `gputop run ARGS` in a subprocess; ``preamble`` runs in its interpreter before the CLI does."""
    code = f"import sys\n{preamble}\nfrom gputop.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, "run", *args],
        env={**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def finish(proc: subprocess.Popen, timeout_s: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, err


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Ended:
    """A job run to its end under ``gputop run --headless --report-json``: its command, gputop's exit status and
    output, the report, and the probe directory the run used."""

    job: list[str]
    code: int
    out: str
    err: str
    report: Path
    probe_dir: Path


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> Ended:
    """train.py with two workers for two epochs of ten batches under Adam, ending with status 3: one run for the
    tests that read what a run leaves (each is a torch start)."""
    home = tmp_path_factory.mktemp("ended")
    probe_dir = home / "probe"
    probe_dir.mkdir(mode=0o700)
    job = [*PYTHON, str(SCRIPTS / "train.py"), "--workers", "2", "--epochs", "2", "--batches", "10", "--exit-code", "3"]
    job += ["--optimizer", "Adam"]
    report = home / "report.json"
    # A deadline against a hang, not a measure: on a loaded machine the start and the wrap-up take minutes.
    run = gputop_run("--headless", "--report-json", str(report), "--", *job, probe_dir=probe_dir)
    code, out, err = finish(run, timeout_s=240)
    return Ended(job, code, out, err, report, probe_dir)


def test_exit_code_is_the_commands_and_the_report_holds_its_findings_and_training_view(ended):
    assert ended.code == 3, ended.err
    assert ended.out.splitlines()[-1] == "done 2 epochs", "the job keeps stdout to itself"
    assert "advisor findings for PID" in ended.err
    doc = json.loads(ended.report.read_text())
    assert (doc["schema"], doc["command"], doc["exit_code"], doc["advice"]) == (1, ended.job, 3, [])
    (view,) = doc["training"]
    assert view["pid"] == doc["pid"]
    probe = view["probe"]
    assert probe["status"] == "ok"
    (loader,) = probe["loaders"]
    assert (loader["passes"], loader["batches"]) == (2, 20)
    assert loader["requested"]["num_workers"] == loader["effective"]["num_workers"] == 2
    assert loader["effective"]["start_method"] == "fork"
    assert sorted(os.listdir(ended.probe_dir)) == [], "the run's reports are removed once it is over"


def test_a_command_killed_by_a_signal_exits_like_a_shell_says(probe_dir):
    code, _, _ = finish(
        gputop_run("--headless", "--", *PYTHON, "-c", "import os; os.kill(os.getpid(), 9)", probe_dir=probe_dir)
    )

    assert code == 128 + 9


def test_a_missing_command_is_127(probe_dir):
    code, _, err = finish(gputop_run("--headless", "--", "no-such-command-here", probe_dir=probe_dir))

    assert code == 127
    assert err == "gputop: cannot run no-such-command-here: No such file or directory\n"


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (".", "Is a directory"),
        ("missing/report.json", "No such file or directory"),
        ("a-file/report.json", "Not a directory"),
    ],
)
def test_a_report_json_that_cannot_be_written_is_refused_before_the_job_starts(probe_dir, tmp_path, where, reason):
    (tmp_path / "a-file").write_text("")
    marker = tmp_path / "ran"
    path = tmp_path / where

    code, _, err = finish(
        gputop_run("--headless", "--report-json", str(path), "--", "touch", str(marker), probe_dir=probe_dir)
    )

    assert code == 2
    assert err == f"gputop: error: cannot write --report-json {path}: {reason}\n"
    assert not marker.exists(), "the job did not start"


@pytest.mark.parametrize(("signo", "name"), [(signal.SIGTERM, "TERM"), (signal.SIGINT, "INT")])
def test_a_signal_sent_to_gputop_is_forwarded_once(probe_dir, signo, name):
    proc = gputop_run("--headless", "--", *PYTHON, str(SCRIPTS / "count_signals.py"), probe_dir=probe_dir)
    read_line(proc, "ready")

    os.kill(proc.pid, signo)

    code, out, err = finish(proc)
    assert f"{name}=1" in out, err
    assert code == 41


def test_ctrl_c_at_the_terminal_reaches_the_job_once(probe_dir):
    # The terminal sends SIGINT to its whole foreground group, gputop and the job alike: gputop must not add one.
    env = {**os.environ, "GPUTOP_PROBE_DIR": str(probe_dir)}
    argv = [sys.executable, "-m", "gputop", "run", "--headless", "--", *PYTHON, str(SCRIPTS / "count_signals.py")]
    code, output = run_in_terminal(argv, env, [(b"ready", b"\x03")])
    assert b"INT=1 TERM=0" in output, output
    assert code == 41


def test_the_probe_reaches_python_processes_below_a_shell_and_keeps_each_ones_last_report(probe_dir):
    # One after the other: the second starts writing once the first has exited. Its probe cleared the reports of
    # processes that were gone, the first's with them, which the run reads at its end (a torchrun rank that
    # finished before the other started writing was missing from the run's report).
    train = f"{' '.join(PYTHON)} {SCRIPTS / 'train.py'}"
    script = f"{train} --epochs 1; {train} --epochs 1 --batches 10; :"

    code, out, err = finish(
        gputop_run("--headless", "--report-json", "-", "--", "sh", "-c", script, probe_dir=probe_dir)
    )

    assert code == 0, err
    doc = last_json(out)
    python = [v for v in doc["training"] if v["pid"] != doc["pid"]]
    # In either order: a process the dashboard never saw alive comes after the others, from its report alone.
    ended = sorted((v["probe"]["status"], v["probe"]["loaders"][0]["batches"]) for v in python)
    assert ended == [("ok", 10), ("ok", 20)]


def test_the_probe_reaches_every_torchrun_rank(probe_dir):
    torchrun = [*PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    job = [*torchrun, str(SCRIPTS / "train.py"), "--workers", "1", "--epochs", "2"]

    code, out, err = finish(gputop_run("--headless", "--report-json", "-", "--", *job, probe_dir=probe_dir))

    assert code == 0, err
    views = last_json(out)["training"]
    ranks = [v["probe"] for v in views if v["probe"]["status"] == "ok"]
    seen = [(v["pid"], v["role"], v["probe"]["status"], v["probe"].get("reason")) for v in views]
    assert sorted((p["rank"], p["world_size"]) for p in ranks) == [(0, 2), (1, 2)], seen
    assert all(p["loaders"][0]["batches"] == 40 for p in ranks)


def test_an_existing_sitecustomize_still_runs(probe_dir):
    check = (
        "import os, sys; print('existing', os.environ.get('EXISTING_SITECUSTOMIZE_RAN'), 'gputop_probe' in sys.modules)"
    )
    env = {"PYTHONPATH": str(SCRIPTS / "sitecustomize_marker")}

    code, out, err = finish(gputop_run("--headless", "--", *PYTHON, "-c", check, probe_dir=probe_dir, env=env))

    assert code == 0, err
    assert "existing 1 True" in out


def test_headless_prints_a_periodic_status_line(probe_dir):
    job = [*PYTHON, str(SCRIPTS / "train.py"), "--workers", "1", "--epochs", "0", "--item-s", "0.02", "--persistent"]
    proc = gputop_run("--headless", "-d", "0.5", "--", *job, probe_dir=probe_dir)
    # The first lines may come before the loader's worker is up ("0 workers"): the line that names it is awaited.
    line = read_stderr_line(proc, "gputop: PID ", want="worker (fork)", timeout_s=90)
    proc.terminate()

    code, _, _ = finish(proc)
    assert code == 42  # the job's own answer to the forwarded SIGTERM
    assert "batch 4" in line and "data wait" in line
    assert "1 worker (fork)" in line
    assert "pin_memory off" in line


def read_stderr_line(proc: subprocess.Popen, prefix: str, want: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith(prefix) and want in line:
            return line
        if not line:
            break
    pytest.fail(f"no status line with {want!r}")


def test_without_a_dashboard_it_says_so_and_runs_headless(probe_dir):
    preamble = "sys.modules['gputop.ui.app'] = None  # as where Textual is missing"

    code, _, err = finish(
        gputop_run("--", *PYTHON, "-c", "raise SystemExit(5)", probe_dir=probe_dir, preamble=preamble)
    )

    assert code == 5
    assert "no dashboard here" in err
    assert "running headless" in err


def test_the_dashboard_is_focused_on_the_job_whose_output_goes_to_a_log(probe_dir):
    preamble = (
        "import types\n"
        "app = types.ModuleType('gputop.ui.app')\n"
        "app.run_dashboard = lambda feed, **kw: print('dashboard', type(feed).__name__, "
        "[(k, kw[k]) for k in ('interval_s', 'focus_pid', 'readonly')], sorted(kw), file=sys.stderr) or 0\n"
        "sys.modules['gputop.ui.app'] = app"
    )
    job = [*PYTHON, "-c", "print('job output')"]

    code, out, err = finish(gputop_run("--report-json", "-", "--", *job, probe_dir=probe_dir, preamble=preamble))

    assert code == 0, err
    pid = last_json(out)["pid"]
    keys = ["close", "focus_pid", "interval_s", "notice", "readonly"]
    assert f"dashboard LiveFeed [('interval_s', 1.0), ('focus_pid', {pid}), ('readonly', False)] {keys}" in err
    assert "job output" not in out.splitlines()[:-1]
    log = next(line for line in err.splitlines() if "job output was written to" in line).rsplit(" ", 1)[1]
    assert Path(log).read_text() == "job output\n"


def test_the_probe_loads_in_a_job_whose_interpreter_has_no_gputop(probe_dir, tmp_path):
    """The job's interpreter need not have gputop: a venv that sees torch but not gputop (as with `python3 -m gputop`
    run from a checkout, or another virtual environment) still gets the probe and its reports."""
    venv = tmp_path / "job-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    spec = importlib.util.find_spec("torch")  # not imported here: it would swell the test process by 400 MiB
    assert spec is not None and spec.origin is not None
    torch_dir = Path(spec.origin).parents[1]
    (site / "torch.pth").write_text(f"{torch_dir}\n")  # torch and its needs; gputop's own editable hook is not run
    python = str(venv / "bin" / "python")
    lacks = subprocess.run([python, "-c", "import gputop"], capture_output=True, text=True, cwd=tmp_path)
    assert "No module named 'gputop'" in lacks.stderr, "the job's interpreter must not see gputop"
    job = [python, "-W", "ignore", str(SCRIPTS / "train.py"), "--workers", "1", "--epochs", "1", "--batches", "5"]
    report = tmp_path / "report.json"

    code, _, err = finish(gputop_run("--headless", "--report-json", str(report), "--", *job, probe_dir=probe_dir))

    assert code == 0, err
    assert "probe not installed" not in err
    (view,) = json.loads(report.read_text())["training"]
    assert view["probe"]["status"] == "ok"
    assert [loader["batches"] for loader in view["probe"]["loaders"]] == [5]


def test_the_report_splits_a_cpu_jobs_memory_into_weights_gradients_and_optimizer_state(ended):
    # train.py's MODEL: Linear(4, 64) and Linear(64, 2), M×N + N each: 320 + 130 = 450 float32 parameters.
    assert "--optimizer" in ended.job and ended.code == 3, ended.err  # the job's own status, as it chose
    (view,) = json.loads(ended.report.read_text())["training"]
    (cpu,) = view["memory"]
    assert (cpu["device"], cpu["parameters"], cpu["weight_dtypes"]) == ("cpu", 450, {"float32": 1800})
    assert cpu["parts"] == {
        "weights": 1800,
        "gradients": 1800,
        "optimizer": 2 * 1800 + 4 * 4,  # exp_avg and exp_avg_sq per parameter, a float32 step per tensor
        "other": None,
        "activations": None,
        "cache": None,
        "outside": None,
    }
    assert view["probe"]["optimizers"] == ["Adam"]
