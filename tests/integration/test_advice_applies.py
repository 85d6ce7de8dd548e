"""Advice only where it applies, on real processes side by side: two plain processes holding memory on an idle
GPU (no torch, no DataLoader, no probe), a torch inference loop, and a training job with DataLoader workers, each
on its own fake GPU, judged by one advisor watching the whole machine (as `gputop export` does)."""

from __future__ import annotations

import subprocess
import sys
import time

from gputop.advisor import Advisor, AdvisorConfig
from gputop.advisor.rules import RULES
from gputop.collect.sampler import SnapshotMaker
from gputop.collect.training import TrainingCollector
from gputop.model import EVIDENCE_TORCH_THREADS, EVIDENCE_WORKERS
from tests.fakenvml.state import FakeProcess, FakeState
from tests.machines import h100
from tests.training.conftest import SCRIPTS, read_line

GIB = 1 << 30
INFERENCE = """
import time, torch
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
print("ready", flush=True)
while True:
    with torch.no_grad():
        model(torch.randn(32, 256))
    time.sleep(0.01)
"""
TRAIN_ARGS = ("--workers", "2", "--epochs", "0", "--item-s", "0.02", "--batch-size", "4")
GPU_RULES = {rule.id for rule in RULES if rule.gpu}


def test_each_process_gets_only_the_findings_that_apply_to_it(fake_driver, tmp_path, sleepers):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir(mode=0o700)
    plain = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    sleepers.extend(plain)
    inference = subprocess.Popen([sys.executable, "-W", "ignore", "-c", INFERENCE], stdout=subprocess.PIPE, text=True)
    training = subprocess.Popen(
        [sys.executable, "-W", "ignore", str(SCRIPTS / "train.py"), *TRAIN_ARGS],
        stdout=subprocess.PIPE,
        text=True,
    )
    sleepers.extend([inference, training])
    read_line(inference, "ready", timeout_s=60)
    read_line(training, "ready", timeout_s=60)
    holders = [FakeProcess(p.pid, 6 * GIB) for p in plain]
    fake_driver(
        FakeState(
            gpus=[
                h100(0, util_gpu=0, memory_used=12 * GIB, processes=holders),  # memory held, nothing running
                h100(1, util_gpu=20, memory_used=10 * GIB, processes=[FakeProcess(inference.pid, 10 * GIB)]),
                h100(2, util_gpu=25, memory_used=10 * GIB, processes=[FakeProcess(training.pid, 10 * GIB)]),
            ]
        )
    )
    maker = SnapshotMaker(training=TrainingCollector(probe_dir=str(probe_dir)))
    advisor = Advisor(config=AdvisorConfig(window_s=3.0, idle_s=3.0))
    try:
        deadline = time.monotonic() + 9.0
        while time.monotonic() < deadline:
            snap = maker.snapshot()
            advisor.update(snap)
            time.sleep(0.25)
    finally:
        maker.close()

    views = {v.pid: v for v in snap.training}
    assert views[inference.pid].evidence == () and all(views[p.pid].evidence == () for p in plain)
    assert EVIDENCE_WORKERS in views[training.pid].evidence
    about = {pid: [a.id for a in advisor.active if pid in a.concerns] for pid in [*views]}
    # The idle GPU's finding, once, for both holders of its memory; nothing about training for them.
    (idle,) = [a for a in advisor.active if a.id == "gpu-idle"]
    assert sorted(idle.pids) == sorted(p.pid for p in plain)
    assert all(about[p.pid] == ["gpu-idle"] for p in plain)
    # The inference loop's GPU is not idle, and it shows no training: nothing, though its GPU is as under-filled
    # as the training job's.
    assert about[inference.pid] == []
    # The training job (DataLoader workers): a larger batch fits its under-filled GPU, for it alone.
    assert "batch-too-small" in about[training.pid]
    assert not set(about[training.pid]) & GPU_RULES


AUTOGRAD_THREAD = """
import threading, time
def device_thread():
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write("pt_autograd_0")  # the name torch gives its autograd thread of the first GPU
    print("ready", flush=True)
    time.sleep(300)
print("started", flush=True)
input()  # the first backward pass on a GPU, when the test says so
threading.Thread(target=device_thread, daemon=True).start()
time.sleep(300)
"""


def test_a_thread_torch_named_is_training_evidence_even_started_late(fake_driver, tmp_path, sleepers):
    proc = subprocess.Popen(
        [sys.executable, "-c", AUTOGRAD_THREAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    sleepers.append(proc)
    fake_driver(FakeState(gpus=[h100(0, processes=[FakeProcess(proc.pid, 4 * GIB)])]))
    maker = SnapshotMaker(training=TrainingCollector(probe_dir=str(tmp_path)))
    try:
        read_line(proc, "started")
        (before,) = maker.snapshot(force_slow=True).training
        proc.stdin.write("\n")
        proc.stdin.flush()
        read_line(proc, "ready")
        (after,) = maker.snapshot(force_slow=True).training
    finally:
        maker.close()

    assert (before.evidence, after.evidence) == ((), (EVIDENCE_TORCH_THREADS,))
