"""Hidden syncs: each warning of torch's sync debug mode mapped to the job's line and the call that waited, and
where each DataLoader was built; with constructed stacks and warnings (the mode itself needs a GPU)."""

from __future__ import annotations

import os
import warnings

import pytest

from gputop.probe import sites, syncs
from gputop.probe.syncs import MESSAGE, SyncSampler, call_of

pytestmark = pytest.mark.fast

TORCH = "/venv/lib/python3.11/site-packages/torch/"
DIRS = (sites.library_dirs()[0], TORCH)
WARNINGS = (warnings.__file__, 100, "_showwarnmsg")


def sampler() -> tuple[SyncSampler, list[str]]:
    failures: list[str] = []
    found = SyncSampler(lambda where, exc: failures.append(f"{where}: {exc}"))
    found.enabled = True
    return found, failures


@pytest.mark.parametrize(
    ("torch_functions", "line", "call"),
    [
        ([], "    loss_value = loss.item()", "item"),
        ([], "    mask = (x > 0).nonzero()", "nonzero"),
        ([], "    host = logits.cpu().tolist()", "cpu"),
        ([], "    torch.cuda.synchronize()", "synchronize"),
        ([], "    if loss > 10:", "bool"),
        ([], "    total += float(loss)", "float"),
        (["__format__"], '    print(f"{loss}")', "print"),
        (["__bool__"], "    while not done:", "bool"),
        ([], "    value = something_else(x)", "sync"),
    ],
)
def test_the_call_that_waited_is_named_from_torchs_frame_or_the_jobs_line(torch_functions, line, call):
    assert call_of(torch_functions, line) == call


def test_a_sync_is_put_on_the_first_line_of_the_jobs_own_code(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n" * 56 + "    print(loss.item())\n")
    frames = [
        (sites.__file__, 10, "_showwarning"),  # the probe's own wrapper
        WARNINGS,
        (TORCH + "_tensor.py", 900, "__format__"),
        (str(script), 57, "train"),
        (str(script), 90, "<module>"),
    ]
    counter, _ = sampler()

    counter.seen(frames, DIRS)
    counter.seen(frames, DIRS)
    counter.sampled_steps = 2

    report = counter.report()
    assert report["syncs_per_step"] == 1.0
    assert report["sync_sites"] == [{"site": "train.py:57", "call": "print", "per_step": 1.0}]


def test_sites_are_the_eight_most_frequent(tmp_path):
    counter, _ = sampler()
    for line in range(1, 21):
        for _ in range(line):
            counter.seen([(str(tmp_path / "train.py"), line, "main")], DIRS)
    counter.sampled_steps = 1

    report = counter.report()
    assert [s["site"] for s in report["sync_sites"]] == [f"train.py:{n}" for n in range(20, 12, -1)]
    assert report["syncs_per_step"] == sum(range(1, 21))


def test_a_cpu_job_has_no_syncs_and_says_why():
    report = SyncSampler(lambda *_: None).report()

    assert report["syncs_per_step"] is None
    assert report["unavailable"] == {"syncs_per_step": "no CUDA in this process: the host never waits for a GPU"}


def test_during_a_sampled_step_the_sync_warnings_are_counted_and_kept_from_the_job(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: shown.append(str(message)))
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    counter, failures = sampler()
    counter._install()
    counter.active = True

    for _ in range(2):
        warnings.warn(MESSAGE, UserWarning, stacklevel=1)  # this line: the job's, as far as the sampler can tell
    warnings.warn("something else", UserWarning, stacklevel=1)

    assert (counter.total, failures, shown) == (2, [], ["something else"])
    ((site, call),) = counter.counts
    assert site.startswith(os.path.join("tests", "probe", "test_syncs.py:")) and call == "sync"


def test_outside_a_sampled_step_the_jobs_own_sync_warnings_reach_it(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: shown.append(str(message)))
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    counter, _ = sampler()
    counter._install()

    warnings.warn(MESSAGE, UserWarning, stacklevel=1)

    assert (counter.total, shown) == (0, [MESSAGE])


def test_a_site_is_named_relative_to_the_working_directory_or_by_its_base_name():
    assert sites.name_site("/work/job/src/train.py", 41, cwd="/work/job") == "src/train.py:41"
    assert sites.name_site("/elsewhere/train.py", 41, cwd="/work/job") == "train.py:41"
    assert sites.name_site("<stdin>", 3, cwd="/work/job") == "<stdin>:3"
    assert len(sites.name_site("/work/job/" + "d/" * 200 + "x.py", 1, cwd="/work/job")) == sites.MAX_SITE_CHARS


def test_the_jobs_frame_is_the_first_outside_torch_the_probe_and_the_interpreters_machinery():
    frames = [
        (os.path.join(os.path.dirname(sites.__file__), "hooks.py"), 70, "__init__"),
        (TORCH + "utils/data/dataloader.py", 250, "__init__"),
        ("<frozen importlib._bootstrap>", 1, "_call"),
        ("/work/job/train.py", 41, "main"),
    ]

    assert sites.first_job_frame(frames, DIRS) == 3
    assert sites.first_job_frame(frames[:3], DIRS) is None


def test_the_sampler_samples_one_step_in_so_many_once_cuda_is_there():
    counter, _ = sampler()

    due = [steps for steps in range(200) if counter.due(steps)]

    assert due == [0, syncs.SAMPLE_EVERY, 2 * syncs.SAMPLE_EVERY, 3 * syncs.SAMPLE_EVERY]
