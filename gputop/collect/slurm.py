"""The Slurm job a process runs in: its id and step from the cgroup (``gputop.collect.container``), its name, user,
state and GPUs from ``scontrol -d show job -o ID``, asked off the sampling thread and kept a while.

``scontrol`` rather than ``squeue --json``: Slurm 22.05's ``squeue --json`` ignores ``--jobs`` and writes the
whole queue, which on a large cluster is hundreds of megabytes per question; ``scontrol`` answers for one job.

Its answer is untrusted: the job's name is whatever its owner typed, spaces and ``Key=value`` words included, so
the fields are read where Slurm puts them (the name up to the last ``UserId=`` before ``GroupId=``), every value
is bounded and made printable, and a malformed answer is a reason, never an exception.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable

from gputop.model import SLURM_JOB_ID_CHARS, SLURM_MAX_GPUS, SLURM_TEXT_CHARS, SlurmJob, frozen_reasons
from gputop.sanitize import printable

SCONTROL_TIMEOUT_S = 5.0
"""How long one ``scontrol`` may take: its default message timeout is 10 s, a controller that slow is down."""
MAX_SCONTROL_BYTES = 64 * 1024
"""The most of ``scontrol``'s answer read: one job's line is about 1.5 KB, a job on a thousand nodes' ``-d``
details some 60."""
FOUND_KEEP_S = 60.0
"""How long a job's answer is kept: its name and GPUs do not change while it runs."""
FAILED_KEEP_S = 15.0
"""How long a failed answer is kept before asking again (a controller restarting, a job just submitted)."""
MAX_JOBS_KEPT = 256
"""The most jobs remembered; a node runs a few at a time."""

LOOKING_UP = "asking scontrol"
NO_SCONTROL = "no scontrol on PATH"
NOT_IN_SLURM = "no such job in Slurm (ended?)"
ANOTHER_JOB = "scontrol answered for another job"
NO_GPUS = "no GPUs allocated on this node"
SPANS_NODES = "its GPUs on this node not named (no GRES line for this host)"
_JOB_FIELDS = ("name", "user", "state", "gpus")

JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10}|\+[0-9]{1,5})?", re.ASCII)
"""A job id as ``--slurm-job`` takes it: a number, an array task ``<job>_<task>``, a het job ``<job>+<offset>``."""
_HEAD = re.compile(r"JobId=(\S+) JobName=(.*) UserId=(\S*?)\((\d+)\) GroupId=", re.DOTALL)
_NODE_GRES = re.compile(r"(?:^| )Nodes=(\S+) CPU_IDs=\S* Mem=\S* GRES=(\S*)")
_GPU_IDX = re.compile(r"gpu(?::[^:(\s]+)*:\d+\(IDX:([0-9,\-]+)\)")


def _text(value: str, limit: int = SLURM_TEXT_CHARS) -> str:
    """``value`` made printable, then cut to ``limit`` characters (an escape makes one character several)."""
    shown = printable(value[: limit * 8])
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}…"


def _field(rest: str, key: str) -> str | None:
    """The first ``key=value`` of ``rest``, which Slurm writes before any field its user sets (the work directory,
    the command)."""
    found = re.search(rf"(?:^| ){re.escape(key)}=(\S*)", rest)
    return None if found is None else found.group(1)


def unknown(job_id: str, reason: str) -> SlurmJob:
    """Job ``job_id`` with nothing known of it but its id, for ``reason``."""
    return SlurmJob(_text(job_id, SLURM_JOB_ID_CHARS), unavailable=frozen_reasons(dict.fromkeys(_JOB_FIELDS, reason)))


def gpu_indices(gres: str) -> tuple[int, ...] | None:
    """The GPU indices of a ``GRES`` value (``gpu:2(IDX:0-1)``, ``gpu:a100:1(IDX:3),gpu:h100:1(IDX:5)``), in
    order, at most ``SLURM_MAX_GPUS``; None where it names no GPU index or a malformed one."""
    found: list[int] = []
    for match in _GPU_IDX.finditer(gres[:MAX_SCONTROL_BYTES]):
        for part in match.group(1).split(","):
            low, dash, high = part.partition("-")
            if not low.isdigit() or (dash and not high.isdigit()):
                return None
            first, last = int(low), int(high) if dash else int(low)
            if last < first or last >= SLURM_MAX_GPUS:
                return None
            found.extend(range(first, last + 1))
    unique = tuple(dict.fromkeys(found))
    return unique[:SLURM_MAX_GPUS] or None


def parse_scontrol_job(text: str, job_id: str, host: str | None = None) -> SlurmJob:
    """The job ``job_id`` as one line of ``scontrol -d show job -o`` tells it; its GPUs those of ``host``'s
    ``Nodes=... GRES=`` (the only one where the job runs on one node). A line that is not the job's, or
    malformed, gives a job whose fields are all None with that reason."""
    line = next((line for line in text[:MAX_SCONTROL_BYTES].splitlines() if line.startswith("JobId=")), "")
    head = _HEAD.match(line)
    if head is None or head.group(1) != job_id:
        reason = "malformed scontrol answer" if line else NOT_IN_SLURM
        return unknown(job_id, ANOTHER_JOB if head is not None else reason)
    rest = line[head.end() :]
    reasons: dict[str, str] = {}
    state = _field(rest, "JobState")
    if state is None:
        reasons["state"] = "not in scontrol's answer"
    segments = _NODE_GRES.findall(rest)
    ours = [gres for nodes, gres in segments if host is not None and nodes == host] or (
        [segments[0][1]] if len(segments) == 1 else []
    )
    gpus = gpu_indices(ours[0]) if ours else None
    if gpus is None:
        reasons["gpus"] = NO_GPUS if ours or not segments else SPANS_NODES
    name, user = head.group(2), head.group(3)
    if not name:
        reasons["name"] = "no name given"
    return SlurmJob(
        _text(job_id, SLURM_JOB_ID_CHARS),
        name=_text(name) if name else None,
        user=_text(user or head.group(4)),
        state=None if state is None else _text(state),
        gpus=gpus,
        unavailable=frozen_reasons(reasons),
    )


Runner = Callable[[list[str], float], tuple[int, str]]
"""Runs a command with a timeout: its exit status and up to ``MAX_SCONTROL_BYTES`` of its output."""


def run_bounded(argv: list[str], timeout_s: float) -> tuple[int, str]:
    """``argv``'s exit status and the start of its standard output (its error output where that is empty);
    a command that does not finish in ``timeout_s`` is killed and said so."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"no answer in {timeout_s:g} s"
    except OSError as exc:
        return -1, exc.strerror or "cannot run"
    out = done.stdout if done.stdout.strip() or done.returncode == 0 else done.stderr
    return done.returncode, out[:MAX_SCONTROL_BYTES].decode(errors="replace")


def ask_scontrol(job_id: str, run: Runner = run_bounded, host: str | None = None) -> SlurmJob:
    """The job ``job_id`` from ``scontrol -d show job -o``, now (it blocks for up to ``SCONTROL_TIMEOUT_S``)."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return unknown(job_id, NO_SCONTROL)
    status, out = run([scontrol, "-d", "show", "job", "-o", job_id], SCONTROL_TIMEOUT_S)
    if status != 0:
        first = out.strip().splitlines()[0] if out.strip() else f"exit status {status}"
        # scontrol names itself at the start of its own errors: "scontrol: error: ..."
        reason = NOT_IN_SLURM if "Invalid job id" in first else f"scontrol: {_text(first.removeprefix('scontrol: '))}"
        return unknown(job_id, reason)
    return parse_scontrol_job(out, job_id, host if host is not None else socket.gethostname().split(".")[0])


class SlurmJobs:
    """Jobs' answers from Slurm for the sampler: ``job`` never waits, it gives what is known and has a thread ask
    ``scontrol`` for what is not (one question at a time, each job kept ``FOUND_KEEP_S``)."""

    def __init__(self, ask: Callable[[str], SlurmJob] = ask_scontrol) -> None:
        self._ask = ask
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, SlurmJob]] = {}
        self._wanted: dict[str, None] = {}
        self._thread: threading.Thread | None = None

    def job(self, job_id: str, step: str | None = None) -> SlurmJob:
        """The job as last heard of (its fields None with the reason ``LOOKING_UP`` before the first answer), with
        this process's ``step``; asks again in the background where the answer is missing or old."""
        now = time.monotonic()
        with self._lock:
            known = self._known.get(job_id)
            if known is None or now >= known[0]:
                self._wanted[job_id] = None
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="gputop-slurm", daemon=True)
                    self._thread.start()
        if known is None:
            return _with_step(unknown(job_id, LOOKING_UP), step)
        found = known[1]
        return found if found.step == step else _with_step(found, step)

    def wait(self, timeout_s: float = SCONTROL_TIMEOUT_S * 2) -> None:
        """Wait until the questions asked so far are answered, ``timeout_s`` at most."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._thread = None
                    return
                job_id = next(iter(self._wanted))
            try:
                found = self._ask(job_id)
            except Exception as exc:  # a fault here is a reason on screen, never a dead sampler
                found = unknown(job_id, f"error: {exc}")
            keep = FAILED_KEEP_S if found.name is None and found.user is None else FOUND_KEEP_S
            with self._lock:
                self._wanted.pop(job_id, None)
                if len(self._known) >= MAX_JOBS_KEPT and job_id not in self._known:
                    self._known.pop(next(iter(self._known)))
                self._known[job_id] = (time.monotonic() + keep, found)


def _with_step(job: SlurmJob, step: str | None) -> SlurmJob:
    return SlurmJob(job.id, step, job.name, job.user, job.state, job.gpus, job.unavailable)


def valid_job_id(text: str) -> bool:
    return len(text) <= SLURM_JOB_ID_CHARS and JOB_ID.fullmatch(text) is not None
