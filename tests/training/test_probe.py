"""The in-process probe: what it reports, what it costs the training loop (nothing it can raise), where it writes."""

from __future__ import annotations

import collections
import functools
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from gputop.probe import channel, worker_clock
from gputop.probe.loader import NO_COUNTS, LoaderTrack, window_stats
from gputop.run.launch import probe_env
from tests.training.conftest import SCRIPTS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PYTHON = [sys.executable, "-W", "ignore"]
T = TypeVar("T")
Ended = tuple[subprocess.CompletedProcess, dict | None]
"""A job run to its end, and the report it left (None: none)."""


def run_job(probe_dir: Path, *args: str, code: str | None = None, environ: dict[str, str] | None = None) -> Ended:
    """Run train.py ARGS (or ``-c CODE``) with the probe, to its end; returns it and the report it left."""
    argv = [*PYTHON, "-c", code] if code else [*PYTHON, str(SCRIPTS / "train.py"), *args]
    env = probe_env(dict(os.environ if environ is None else environ), str(probe_dir), "test")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    path = probe_dir / f"{proc.pid}.json"
    report = json.loads(path.read_text()) if path.exists() else None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), report


def run_jobs(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Each job's result, two jobs at a time: for jobs whose reports time nothing, each a torch start that spends
    most of its time importing, on one core."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


def private_dir(factory: pytest.TempPathFactory) -> Path:
    """A probe directory as the ``probe_dir`` fixture makes one, for a module's jobs."""
    path = factory.mktemp("job") / "probe"
    path.mkdir(mode=0o700)
    return path


# -- statistics over the running totals -------------------------------------------------------------------------


def test_data_wait_share_is_the_waited_part_of_the_window():
    stats = window_stats((10.0, 100, 2.0, 0.5, 6.0, 90, NO_COUNTS), (14.0, 140, 3.0, 1.0, 9.2, 130, NO_COUNTS))

    assert stats == {
        "window_s": 4.0,
        "window_batches": 40,
        "data_wait_share": 0.25,
        "steps_per_s": 10.0,
        "pass_start_wait_share": 0.125,
        "worker_batch_s": pytest.approx(0.08),  # 3.2 s the workers spent on the window's 40 batches
        "worker_batch_p95_s": None,  # no batch counted by its duration
    }


def counted(**durations: int) -> tuple[int, ...]:
    """Duration buckets holding ``n`` batches of each duration given as ``ms<milliseconds>=n``."""
    counts = list(NO_COUNTS)
    for name, n in durations.items():
        counts[worker_clock.bucket(float(name[2:]) / 1000)] += n
    return tuple(counts)


def test_the_slow_batches_are_the_95th_percentile_of_the_windows_batches():
    # 95 batches of 20 ms and 5 of 300 ms since the window began (the 10 before it, all slow, are not counted).
    then = (0.0, 0, 0.0, 0.0, 0.0, 0, counted(ms300=10))
    now = (10.0, 100, 1.0, 0.0, 3.4, 110, counted(ms20=95, ms300=15))

    stats = window_stats(then, now)

    assert stats["worker_batch_p95_s"] == pytest.approx(0.020, rel=0.1)  # the 95th batch is a fast one
    now = (10.0, 100, 1.0, 0.0, 3.4, 110, counted(ms20=94, ms300=16))
    assert window_stats(then, now)["worker_batch_p95_s"] == pytest.approx(0.300, rel=0.1)


def test_no_percentile_from_fewer_than_twenty_batches():
    then = (0.0, 0, 0.0, 0.0, 0.0, 0, NO_COUNTS)
    now = (10.0, 19, 1.0, 0.0, 3.4, 19, counted(ms20=19))

    assert window_stats(then, now)["worker_batch_p95_s"] is None


def test_a_duration_bucket_is_a_quarter_octave():
    assert worker_clock.bucket_seconds(worker_clock.bucket(0.040)) == pytest.approx(0.040, rel=0.1)
    assert worker_clock.bucket(0.040) - worker_clock.bucket(0.020) == 4
    assert worker_clock.bucket(0.0001) == 0
    assert worker_clock.bucket(float("nan")) == 0
    assert worker_clock.bucket(3600.0) == worker_clock.BUCKETS - 1


def test_a_worker_times_each_batch_it_makes_and_the_loop_reads_the_sums(tmp_path):
    # Real workers, each sample 10 ms asleep, 4 samples a batch: 40 ms and a little more per batch, whatever the
    # loop does meanwhile (it takes each batch at once here, then sleeps 50 ms).
    code = (
        "import time, torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Slow(Dataset):\n"
        "    def __len__(self): return 64\n"
        "    def __getitem__(self, i): time.sleep(0.01); return torch.zeros(2)\n"
        "import gputop.probe as probe; probe.install()\n"
        "loader = DataLoader(Slow(), batch_size=4, num_workers=2)\n"
        "it = iter(loader)\n"
        "for _ in range(12): next(it); time.sleep(0.05)\n"
        "track = next(iter(probe._probe._tracks.values()))\n"
        "seconds, batches, counts = track.workers_time()\n"
        "from gputop.probe import worker_clock\n"
        "print(seconds, batches, sum(counts), worker_clock.percentile(counts, 0.95))\n"
    )
    reports = tmp_path / "probe"
    reports.mkdir(mode=0o700)
    env = {**os.environ, "GPUTOP_PROBE_DIR": str(reports)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split()
    seconds, batches, counted_batches, slow_s = float(words[-4]), int(words[-3]), int(words[-2]), float(words[-1])
    assert batches >= 12
    assert 0.040 <= seconds / batches < 0.2
    assert counted_batches == batches  # each batch timed is counted in one duration bucket
    assert 0.040 * 0.9 <= slow_s < 0.2


def test_a_wait_in_progress_counts_as_waiting():
    track = LoaderTrack(1, object.__new__(type("Loader", (), {})), now=0.0)
    track.waiting_since = 1.0  # blocked on next() since t=1 and still

    stats = window_stats(track.history[0], track.totals(5.0))

    assert stats["data_wait_share"] == pytest.approx(4.0 / 5.0)
    assert stats["steps_per_s"] == 0.0


def ran(track: LoaderTrack, start: float, batches: int, wait_s: float, step_s: float) -> float:
    """``track`` through a pass of ``batches`` batches from ``start``, each waited for ``wait_s`` then worked on
    for ``step_s``, reported about each second as the writer does; the time the pass ended."""
    now, due = start, start + 1.0
    for _ in range(batches):
        now += wait_s + step_s
        track.wait_s += wait_s
        track.count += 1
        track.last_end = now - step_s
        if due <= now:  # the writer's report, at the end of a step (where the totals are those of ``now``)
            track.report(now)
            due += 1.0
    track.passes_ended_at = now
    return now


def test_the_final_report_ends_its_window_where_the_loop_ended_not_at_the_exit():
    """At exit the workers have been shut down, a checkpoint saved: none of that is the loader's time."""
    track = LoaderTrack(1, object.__new__(type("Loader", (), {})), now=0.0)
    ended = ran(track, 0.0, batches=200, wait_s=0.09, step_s=0.01)
    for second in range(21, 81):  # a minute after the loop: live reports on each second
        quiet = track.report(float(second))

    final = track.report(80.5, final=True)

    assert (quiet["steps_per_s"], quiet["data_wait_share"], quiet["window_s"]) == (0.0, 0.0, 10.0)
    assert 10.0 <= final["window_s"] <= 11.0  # from the newest sample 10 s or more before the loop's end
    assert final["data_wait_share"] == pytest.approx(0.9, rel=1e-6)
    assert final["steps_per_s"] == pytest.approx(10.0, rel=1e-6)
    assert final["last_batch_age_s"] == pytest.approx(80.5 - ended + 0.01)
    assert len(track.history) <= 14  # the quiet minute kept as its first and its latest sample


def test_a_pass_under_way_makes_the_final_report_end_at_exit():
    def killed_while_waiting() -> LoaderTrack:
        track = LoaderTrack(1, object.__new__(type("Loader", (), {})), now=0.0)
        ran(track, 0.0, batches=50, wait_s=0.09, step_s=0.01)  # an epoch, ended at t=5
        ended = ran(track, 5.0, batches=40, wait_s=0.09, step_s=0.01)  # the next, whose end never came
        track.passes_ended_at = 5.0
        track.waiting_since = ended  # waiting from t=9 until the exit at t=12
        return track

    final = killed_while_waiting().report(12.0, final=True)

    assert final == killed_while_waiting().report(12.0)  # the window of a live report at the same time
    assert final["data_wait_share"] > 0.9  # three seconds of waiting at the end, counted


def test_an_idle_loader_neither_waits_nor_steps():
    stats = window_stats((0.0, 7, 1.5, 0.0, 0.0, 0, NO_COUNTS), (10.0, 7, 1.5, 0.0, 0.0, 0, NO_COUNTS))

    assert (stats["data_wait_share"], stats["steps_per_s"]) == (0.0, 0.0)


# -- reports of real jobs ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loader_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Ended]:
    """A job with two workers, three passes of five batches of three, run with the report of a process that is
    gone already in its report directory; the directory and the job."""
    directory = private_dir(tmp_path_factory)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (directory / f"{dead.stdout.strip()}.json").write_text("{}")
    return directory, run_job(directory, "--workers", "2", "--batch-size", "3", "--epochs", "3", "--batches", "5")


def test_report_carries_the_loader_configuration_as_requested_and_in_effect(loader_job):
    _, (job, report) = loader_job

    assert job.returncode == 0, job.stderr
    assert (report["format"], report["version"], report["failures"]) == ("gputop-probe", 1, 0)
    (loader,) = report["loaders"]
    assert loader["requested"] == {
        "batch_size": 3,
        "num_workers": 2,
        "pin_memory": False,
        "pin_memory_device": None,
        "prefetch_factor": 2,
        "persistent_workers": False,
        "start_method": None,
        "drop_last": False,
        "timeout_s": 0,
    }
    assert loader["effective"] == {**loader["requested"], "start_method": "fork"}
    assert (loader["passes"], loader["batches"]) == (3, 15)


RANKS = ["²", "١", "99999999999999999999"]


@pytest.fixture(scope="module")
def rank_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ended]:
    """A short job with each rank in RANK, and its report, by the rank."""
    args = ("--workers", "0", "--epochs", "1", "--batches", "2")
    return run_jobs(
        {
            rank: functools.partial(run_job, private_dir(tmp_path_factory), *args, environ={**os.environ, "RANK": rank})
            for rank in RANKS
        }
    )


@pytest.mark.parametrize("rank", RANKS)
def test_a_rank_that_is_not_ascii_digits_is_unknown_and_the_report_still_written(rank_jobs, rank):
    """``str.isdigit`` takes ``²``, which ``int`` refuses: the report then failed to build, every time."""
    job, report = rank_jobs[rank]

    assert job.returncode == 0, job.stderr
    assert report is not None and (report["rank"], report["failures"]) == (None, 0)
    assert report["launch"]["RANK"] == rank  # kept as text, for the monitor to check (launch_env)


def test_persistent_iterators_count_each_pass(probe_dir):
    job, report = run_job(probe_dir, "--workers", "1", "--persistent", "--epochs", "4", "--batches", "3")

    assert job.returncode == 0, job.stderr
    assert (report["loaders"][0]["passes"], report["loaders"][0]["batches"]) == (4, 12)


def test_slow_workers_show_as_a_high_data_wait_share(probe_dir):
    # The job goes on 1.5 s after its loop: its last report still describes the loop, not its exit.
    _, report = run_job(probe_dir, "--workers", "1", "--item-s", "0.01", "--batches", "15", "--after-s", "1.5")

    loader = report["loaders"][0]
    assert loader["data_wait_share"] > 0.7
    assert loader["samples_per_s"] == pytest.approx(loader["steps_per_s"] * 4)


def test_a_slow_training_step_shows_as_a_low_data_wait_share(probe_dir):
    step_s = 0.2  # well above what receiving a batch from a worker takes, on a busy machine too
    _, report = run_job(probe_dir, "--workers", "2", "--step-s", str(step_s), "--batches", "15")

    loader = report["loaders"][0]
    # The wait for the workers' first batch, paid once, is reported apart: it can be most of a short run.
    assert loader["data_wait_share"] - loader["pass_start_wait_share"] < 0.3
    assert 0 < loader["steps_per_s"] <= 1 / step_s


def test_errors_of_the_dataset_reach_the_loop_unchanged(probe_dir):
    jobs = {workers: functools.partial(run_job, probe_dir, "--workers", workers, "--fail-at", "9") for workers in "01"}
    for workers, (job, report) in run_jobs(jobs).items():
        assert job.returncode == 7, f"{workers} workers: {job.stderr}"
        assert "ValueError: " in job.stdout and "item 9 is broken" in job.stdout
        assert report["failures"] == 0


def test_a_failing_probe_is_counted_and_the_loop_goes_on(probe_dir):
    # The probe's step-boundary reading fails on every step: the loop must not notice.
    code = f"""
import sys
sys.path.insert(0, {str(SCRIPTS)!r})
import gputop_probe.cuda as cuda
def broken(self):
    raise RuntimeError("no allocator here")
cuda.CudaReader.read = broken
sys.argv = ["train.py", "--epochs", "2", "--step-s", "0.3", "--batches", "3"]
import train
sys.exit(train.main())
"""
    job, report = run_job(probe_dir, code=code)

    assert job.returncode == 0, job.stderr
    assert "done 2 epochs" in job.stdout
    assert report["failures"] >= 2
    assert report["last_failure"] == "cuda stats: RuntimeError: no allocator here"
    assert report["loaders"][0]["batches"] == 6


def test_a_report_that_cannot_be_written_is_a_counted_failure(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # open to everyone: the probe refuses it
    job, _ = run_job(
        shared,
        code="""
import gputop_probe, torch
for _ in torch.utils.data.DataLoader(range(8), batch_size=2):
    pass
probe = gputop_probe.installed()
probe.write()
print(probe.failures, probe.last_failure)
""",
    )

    assert job.returncode == 0, job.stderr
    failures, message = job.stdout.strip().split(" ", 1)
    assert int(failures) >= 1
    assert message.startswith("write report: PermissionError: report directory") and "open to other users" in message
    assert os.listdir(shared) == []


def test_a_process_without_dataloaders_writes_nothing(probe_dir):
    job, report = run_job(probe_dir, code="import torch.utils.data, time; time.sleep(0.7)")

    assert job.returncode == 0, job.stderr
    assert report is None
    assert os.listdir(probe_dir) == []


NO_LOADER_JOB = """\
import torch
model = torch.nn.Linear(16, 8)
optimizer = torch.optim.Adam(model.parameters())
for _ in range(3):
    model(torch.randn(4, 16)).sum().backward()
    optimizer.step()
"""


def test_a_loop_without_a_dataloader_reports_once_an_optimizer_steps(probe_dir):
    job, report = run_job(probe_dir, code=NO_LOADER_JOB)

    assert job.returncode == 0, job.stderr
    assert report is not None, "a job that steps an optimizer is a training job, DataLoader or not"
    assert report["failures"] == 0, report["last_failure"]
    assert report["loaders"] == []
    (cpu,) = report["tensors"]["devices"]
    assert cpu["parameters"] == 16 * 8 + 8
    assert cpu["optimizer_bytes"] == 2 * (16 * 8 + 8) * 4 + 2 * 4  # two moments and a float32 step per tensor
    assert report["cuda_reason"] == "CUDA not initialised in this process"


def test_the_optimizer_hook_is_registered_once_when_the_job_installs_the_probe_too(probe_dir):
    code = NO_LOADER_JOB + (
        "import gputop.probe, torch.optim.optimizer as o\n"
        "gputop.probe.install()\n"
        "print(len(o._global_optimizer_post_hooks))\n"
    )
    job, report = run_job(probe_dir, code=code)

    assert job.returncode == 0, job.stderr
    assert job.stdout.split() == ["1"]
    assert report["tensors"]["devices"][0]["parameters"] == 16 * 8 + 8


def test_the_probe_imports_and_installs_where_torch_is_absent():
    code = "import sys; sys.modules['torch'] = None\nimport gputop.probe\nprint(gputop.probe.install())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "True"


def test_a_forked_child_reports_its_own_loaders(probe_dir):
    code = """
import os, torch
loader = torch.utils.data.DataLoader(range(12), batch_size=3)
for _ in loader:
    pass
child = os.fork()
if child == 0:
    for _ in loader:
        pass
    for _ in loader:
        pass
    os._exit(0 if __import__('gputop_probe').installed().write() else 1)
os.waitpid(child, 0)
print(child, flush=True)
"""
    job, parent = run_job(probe_dir, code=code)

    child = json.loads((probe_dir / f"{job.stdout.strip()}.json").read_text())
    assert (parent["loaders"][0]["passes"], parent["loaders"][0]["batches"]) == (1, 4)
    assert (child["pid"], child["loaders"][0]["passes"], child["loaders"][0]["batches"]) == (int(job.stdout), 2, 8)


# -- the channel ------------------------------------------------------------------------------------------------


def test_reports_are_private_to_their_user(tmp_path, monkeypatch):
    directory = tmp_path / "runtime" / "gputop"
    monkeypatch.setenv("GPUTOP_PROBE_DIR", str(directory))

    assert channel.ensure_dir(channel.report_dir()) is None
    channel.write_report(str(directory), 1234, b"{}")

    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "1234.json").stat().st_mode) == 0o600
    assert os.listdir(directory) == ["1234.json"]


def test_report_dir_is_under_the_runtime_dir_else_per_user_in_tmp(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUTOP_PROBE_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert channel.report_dir() == str(tmp_path / "gputop")

    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert channel.report_dir() == str(tmp_path / f"gputop-{os.geteuid()}")


def test_the_probe_removes_reports_of_processes_that_are_gone(loader_job):
    directory, (_, report) = loader_job  # a gone process's report was there before the job started

    assert os.listdir(directory) == [f"{report['pid']}.json"]


def test_reports_of_gone_processes_of_the_run_under_way_are_kept_and_the_others_removed(tmp_path):
    ended = [subprocess.Popen(["true"]) for _ in range(4)]
    gone = [proc.pid for proc in ended if proc.wait() == 0]  # reaped: gone
    mine, other, damaged, old = (tmp_path / f"{pid}.json" for pid in gone)
    mine.write_text(json.dumps({"run_id": "run-a", "pid": gone[0]}))
    other.write_text(json.dumps({"run_id": "run-b"}))
    damaged.write_text('{"run_id": "run-a"')  # cut short: not a report of anybody's run
    old.write_text(json.dumps({"run_id": None}))
    alive = tmp_path / f"{os.getpid()}.json"
    alive.write_text("{}")

    channel.remove_dead_reports(str(tmp_path), "run-a")

    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, alive.name])
    channel.remove_dead_reports(str(tmp_path))  # at the run's end: every gone process's report goes
    assert [p.name for p in tmp_path.iterdir()] == [alive.name]


def test_the_report_says_how_the_training_thread_does_its_math(tensor_jobs):
    # No CUDA here, so no CUDA autocast: the probe reads it off, the precision as set, the dtypes from the step.
    job, report = tensor_jobs[TENSORS_JOB.format(optimizer="SGD", extra="", dtype="torch.float32")]

    assert job.returncode == 0, job.stderr
    assert report["failures"] == 0, report["last_failure"]
    assert (report["autocast"], report["float32_matmul_precision"]) == (False, "high")
    assert report["parameter_dtypes"] == ["float32"]


NO_OPTIMIZER_JOB = """
import torch
from torch.utils.data import DataLoader
for x in DataLoader(torch.randn(8, 4), batch_size=4):
    pass
"""


@pytest.fixture(scope="module")
def no_optimizer_job(tmp_path_factory: pytest.TempPathFactory) -> Ended:
    """A loop over a DataLoader that steps no optimizer, and its report."""
    return run_job(private_dir(tmp_path_factory), code=NO_OPTIMIZER_JOB)


def test_without_an_optimizer_the_parameter_dtypes_are_unknown(no_optimizer_job):
    job, report = no_optimizer_job

    assert job.returncode == 0, job.stderr
    assert (report["autocast"], report["float32_matmul_precision"]) == (False, "highest")
    assert report["parameter_dtypes"] is None


# -- where the tensors' memory goes -----------------------------------------------------------------------------

TENSORS_JOB = """
import torch
from torch.utils.data import DataLoader
torch.set_float32_matmul_precision("high")  # read back by test_the_report_says_how_the_training_thread_does_its_math
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to({dtype})
head = torch.nn.Linear(10, 3)  # a second optimizer's parameters
opt = torch.optim.{optimizer}(model.parameters(), lr=0.01{extra})
opt_head = torch.optim.SGD(head.parameters(), lr=0.01)
for x in DataLoader(torch.randn(16, 32), batch_size=4):
    head(model(x.to({dtype})).float()).sum().backward()
    opt.step()
    opt_head.step()
    opt.zero_grad()
    opt_head.zero_grad()
"""
MODEL_PARAMETERS = 32 * 64 + 64 + 64 * 10 + 10  # Linear M×N + N, twice
HEAD_PARAMETERS = 10 * 3 + 3


TENSOR_CASES = [
    ("SGD", "", "torch.float32", 0, 0),  # plain SGD keeps no state
    ("SGD", ", momentum=0.9", "torch.float32", 1, 0),  # a momentum buffer per parameter
    ("Adam", "", "torch.float32", 2, 4),  # exp_avg and exp_avg_sq, and a float32 step per tensor
    ("AdamW", "", "torch.bfloat16", 2, 4),  # the moments take the parameters' dtype
]


@pytest.fixture(scope="module")
def tensor_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ended]:
    """Each case's job and report, by its code."""
    codes = [TENSORS_JOB.format(optimizer=o, extra=e, dtype=d) for o, e, d, *_ in TENSOR_CASES]
    return run_jobs({code: functools.partial(run_job, private_dir(tmp_path_factory), code=code) for code in codes})


@pytest.mark.parametrize(("optimizer", "extra", "dtype", "state_per_parameter", "scalars"), TENSOR_CASES)
def test_the_report_counts_weights_gradients_and_optimizer_state_exactly(
    tensor_jobs, optimizer, extra, dtype, state_per_parameter, scalars
):
    job, report = tensor_jobs[TENSORS_JOB.format(optimizer=optimizer, extra=extra, dtype=dtype)]

    assert job.returncode == 0, job.stderr
    assert report["failures"] == 0, report["last_failure"]
    size = 2 if dtype == "torch.bfloat16" else 4
    (cpu,) = report["tensors"]["devices"]
    assert cpu["device"] == "cpu"
    assert cpu["parameters"] == MODEL_PARAMETERS + HEAD_PARAMETERS
    model_bytes, head_bytes = MODEL_PARAMETERS * size, HEAD_PARAMETERS * 4
    assert cpu["weights_bytes"] == model_bytes + head_bytes
    assert cpu["gradients_bytes"] == model_bytes + head_bytes  # read right after a step, before zero_grad
    assert cpu["optimizer_bytes"] == state_per_parameter * model_bytes + scalars * 4
    dtypes = collections.Counter({dtype.removeprefix("torch."): model_bytes}) + collections.Counter(float32=head_bytes)
    assert cpu["weight_dtypes"] == dict(dtypes)
    assert cpu["allocated_after_step_bytes"] is None  # the CPU has no allocator statistics
    assert sorted(report["tensors"]["optimizers"]) == sorted({optimizer, "SGD"})
    assert report["parameter_dtypes"] == sorted({dtype.removeprefix("torch."), "float32"})


def test_without_an_optimizer_there_is_no_tensor_breakdown(no_optimizer_job):
    job, report = no_optimizer_job

    assert job.returncode == 0, job.stderr
    assert report["tensors"] is None
