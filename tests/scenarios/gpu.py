"""The fake GPU of a scenario, shared by the test (which writes it before gputop starts: NVML counts GPUs once)
and the job (which adds itself, and its workers, as processes on it once it knows its PID)."""

from __future__ import annotations

import json
import os

from tests.fakenvml.state import FakeProcess, FakeState, write_state
from tests.machines import GIB, h100

SPEC_ENV = "SCENARIO_GPU"
"""JSON: overrides of an H100's fields (``tests.machines.h100``) and ``process_gib``, what the job holds."""


def state_for(spec: dict, processes: dict[int, int]) -> FakeState:
    """One H100 as ``spec`` says, with the given processes (PID: bytes) on it."""
    gpu = h100(0, **{k: v for k, v in spec.items() if k != "process_gib"})
    gpu.processes = [FakeProcess(pid=pid, used_memory=used) for pid, used in processes.items()]
    return FakeState(gpus=[gpu])


def listed(path: str) -> dict[int, int]:
    """The processes the state file lists: its ``process PID BYTES KIND`` lines."""
    with open(path) as f:
        words = [line.split() for line in f if line.startswith("process ")]
    return {int(w[1]): int(w[2]) for w in words}


def join(pid: int, worker: bool = False) -> None:
    """Put ``pid`` on the scenario's GPU, beside those already there, if the scenario has a GPU: the job with
    ``process_gib``, a worker with a CUDA context's half GiB."""
    spec = os.environ.get(SPEC_ENV)
    path = os.environ.get("FAKE_NVML_STATE")
    if not spec or not path:
        return
    gpu = json.loads(spec)
    used = GIB // 2 if worker else int(gpu.get("process_gib", 6) * GIB)
    write_state(path, state_for(gpu, {**listed(path), pid: used}))
