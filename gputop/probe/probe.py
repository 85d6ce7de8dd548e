"""The probe's state inside the training process, and the thread that writes its reports.

The training loop touches this only through the hooks: ``register`` once per iterator, ``sample_step`` at most
once per write interval, and the optimizer step hook (``tensors.py``). Everything that costs more (statistics, JSON,
the file) runs on the writer thread.
Nothing here raises to its caller: a failure is counted and named in the next report.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time
import weakref
from typing import Any

from . import channel, phase_hooks
from .anatomy import StepWindow
from .collectives import wrap_collectives
from .copies import wrap_copies
from .cuda import CudaReader
from .flops import FlopCount
from .loader import LoaderTrack, effective_config
from .oom import OomWatch
from .precision import PrecisionReader, hook_optimizers
from .steps import EventPool, StepTracker
from .syncs import SyncSampler
from .tensors import TensorReader

TRACK_ATTR = "_gputop_probe_track"
LAUNCH_KEYS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
)
"""The launcher's variables the report copies (the monitor checks each): which rank of which job this is."""


def _env_int(name: str) -> int | None:
    """A launcher's count or index: ASCII digits only (``str.isdigit`` takes ``²``, which ``int`` refuses), at most
    seven of them, as the monitor reads the same variables (``gputop.collect.launch_env``)."""
    value = os.environ.get(name, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 7 else None


def _own_start_ticks() -> int | None:
    """This process's start time in clock ticks since boot (``/proc/self/stat`` field 22): with the PID, it
    names this process and no later one that reuses the PID."""
    try:
        with open("/proc/self/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class Probe:
    """Tracks this process's DataLoaders and writes ``<dir>/<pid>.json`` every ``interval_s`` once one exists, or
    once an optimizer steps."""

    def __init__(self, directory: str | None = None, interval_s: float = channel.WRITE_INTERVAL_S) -> None:
        self.directory = directory or channel.report_dir()
        self.interval_s = interval_s
        self.reset()

    def reset(self) -> None:
        """Forget everything: also called in a forked child, which inherits the parent's state but no threads."""
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._tracks: dict[int, LoaderTrack] = {}
        self._next_id = 1
        self.failures = 0
        self.last_failure: str | None = None
        self._writer: threading.Thread | None = None
        self._stop = threading.Event()
        self.sample_due = 0.0
        self._cuda = CudaReader()
        self._cuda_sample: dict[str, Any] | None = None
        self._cuda_reason: str | None = "no step yet"
        self._cuda_sampled_at: float | None = None
        self._precision = PrecisionReader()
        self._tensors = TensorReader()
        self._oom = OomWatch(self.directory, lambda: self._tensors.devices, self.failed)
        self._dir_ready = False
        self._start_ticks = _own_start_ticks()
        if not hasattr(self, "steps"):
            self.steps = StepTracker()
            self._step_hooks = False
            self._collectives = False
            self._cuda_hooks = False
        self.steps.forget()
        self._flops = FlopCount(self.failed)
        self._syncs = SyncSampler(self.failed)
        self.steps.instruments = [self._flops, self._syncs]
        self._window = StepWindow()

    # -- called from the training loop (through the hooks) -----------------------------------------------------

    def register(self, loader: Any, iterator: Any) -> None:
        """Attach a new iterator to its loader's track (created on the loader's first iterator)."""
        with self._lock:
            track = self._tracks.get(id(loader))
            if track is None or track.loader_ref() is not loader:
                track = self._tracks[id(loader)] = LoaderTrack(self._next_id, loader)
                self._next_id += 1
        track.iterator_ref = weakref.ref(iterator)
        track.start_pass(time.perf_counter())
        setattr(iterator, TRACK_ATTR, track)
        if self._writer is None:
            self._start_writer()

    def iterator_built(self, loader: Any, iterator: Any) -> None:
        """Read the configuration in effect once the iterator is complete: a short epoch may end before the
        writer sees it alive."""
        track = getattr(iterator, TRACK_ATTR, None)
        if track is not None:
            track.effective = effective_config(loader, iterator)

    def sample_step(self, now: float) -> None:
        """Read GPU memory at the step boundary (the request for the next batch), at most once per interval; put
        the step's hooks in place as the parts of torch they need appear."""
        self.sample_due = now + self.interval_s
        try:
            self._cuda_sample, self._cuda_reason = self._cuda.read()
            self._cuda_sampled_at = now
        except Exception as exc:
            self.failed("cuda stats", exc)
        if not (self._step_hooks and self._collectives and self._cuda_hooks):
            self._hook_steps()
        try:
            self._precision.read(now, self._after_optimizer_step, self._before_optimizer_step)
        except Exception as exc:
            self.failed("precision", exc)

    def _hook_steps(self) -> None:
        """The hooks that time a step's phases: forward and backward once torch is imported, the collectives once
        ``torch.distributed`` is, the copies to the GPU, CUDA events and the sync sampler once CUDA is initialised
        (``_cuda_sample``: read just before)."""
        torch = sys.modules.get("torch")
        if torch is None or "torch.nn.modules.module" not in sys.modules:
            return
        is_compiling = phase_hooks.compiling_check(torch)
        try:
            if not self._step_hooks:
                self._step_hooks = True
                phase_hooks.install(self.steps, self.failed, self._precision.in_forward)
            if not self._collectives:
                self._collectives = wrap_collectives(self.steps, self.failed, is_compiling)
            if not self._cuda_hooks and self._cuda_sample is not None:
                self._cuda_hooks = True
                wrap_copies(torch, self.steps, self.failed, is_compiling)
                self.steps.events = EventPool(lambda: torch.cuda.Event(enable_timing=True))
                self._syncs.enabled = True
                self.steps.instruments_due = 0
                self._oom.start(torch)
        except Exception as exc:
            self.failed("step hooks", exc)

    def hook_optimizers(self) -> None:
        """Register torch's global optimizer step hooks now, if the job has imported ``torch.optim``: a loop that
        draws its batches without a DataLoader still steps an optimizer."""
        try:
            hook_optimizers(self._after_optimizer_step, self._before_optimizer_step)
        except Exception as exc:
            self.failed("optimizer hook", exc)

    def _before_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step pre hook: the optimizer phase begins."""
        try:
            self.steps.optimizer_started()
        except Exception as exc:
            self.failed("optimizer phase", exc)

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step hook: never raises into ``optimizer.step()``.

        Where no DataLoader is iterated, the end of an optimizer step is the step boundary: GPU memory is read
        there, and the first step starts the writer, so such a job reports its memory like any other."""
        try:
            self.steps.optimizer_finished(optimizer)
        except Exception as exc:
            self.failed("optimizer phase", exc)
        try:
            self._tensors.stepped(optimizer)
            if not self._tracks:
                now = time.perf_counter()
                if now >= self.sample_due:
                    self.sample_step(now)
                if self._writer is None:
                    self._start_writer()
        except Exception as exc:
            self.failed("tensor memory", exc)

    def failed(self, where: str, exc: BaseException) -> None:
        self.failures += 1
        self.last_failure = f"{where}: {type(exc).__name__}: {exc}"[:300]

    # -- the writer ---------------------------------------------------------------------------------------------

    def report(self, final: bool = False) -> dict[str, Any]:
        """The report as of now; ``final`` for the last one, written at exit, whose windows end where the job's
        loop last ran (``LoaderTrack.report``, ``StepWindow.report``) rather than at its exit."""
        now = time.perf_counter()
        with self._lock:
            for key in [k for k, t in self._tracks.items() if not t.active(now)]:
                del self._tracks[key]
            tracks = sorted(self._tracks.values(), key=lambda t: t.loader_id)
        loaders = []
        for track in tracks:
            try:
                loaders.append(track.report(now, final))
            except Exception as exc:
                self.failed(f"loader {track.loader_id}", exc)
        torch = sys.modules.get("torch")
        return {
            "format": channel.REPORT_FORMAT,
            "version": channel.REPORT_VERSION,
            "pid": self.pid,
            "start_ticks": self._start_ticks,
            "written_at": time.time(),
            "interval_s": self.interval_s,
            "run_id": os.environ.get(channel.RUN_ID_ENV),
            "rank": _env_int("RANK"),
            "local_rank": _env_int("LOCAL_RANK"),
            "world_size": _env_int("WORLD_SIZE"),
            "launch": {key: os.environ[key][:256] for key in LAUNCH_KEYS if key in os.environ},
            "python": platform.python_version(),
            "torch": getattr(torch, "__version__", None),
            "failures": self.failures,
            "last_failure": self.last_failure,
            "loaders": loaders,
            "cuda": self._cuda_sample,
            "cuda_reason": self._cuda_reason,
            "cuda_age_s": None if self._cuda_sampled_at is None else now - self._cuda_sampled_at,
            **self._precision.report(),
            "parameter_dtypes": self._tensors.dtypes,
            **self._tensors.report(now),
            "step": self._step_report(now, final),
        }

    def _step_report(self, now: float, final: bool) -> dict[str, Any] | None:
        try:
            syncs, flops = self._syncs.report(), self._flops.report()
            extra = {**syncs, **flops, "unavailable": {**syncs["unavailable"], **flops["unavailable"]}}
            return self._window.report(self.steps, now, extra, final)
        except Exception as exc:
            self.failed("step report", exc)
            return None

    def write(self, final: bool = False) -> bool:
        """Write one report now (``final``: the last, at exit); False (and a counted failure) when it could not be
        written."""
        # One write at a time, the writer thread's and the one at exit: they share a temporary file name. A write
        # stuck for a second (a hung file system) is not waited for longer, so that the job's exit never hangs.
        if not self._write_lock.acquire(timeout=1.0):
            self.failed("write report", TimeoutError("another write is still under way"))
            return False
        try:
            if not self._dir_ready:
                problem = channel.ensure_dir(self.directory)
                if problem:
                    raise PermissionError(problem)
                channel.remove_dead_reports(self.directory, os.environ.get(channel.RUN_ID_ENV))
                self._dir_ready = True
            data = json.dumps(self.report(final), separators=(",", ":"), allow_nan=False).encode()
            channel.write_report(self.directory, self.pid, data)
            return True
        except Exception as exc:
            self.failed("write report", exc)
            return False
        finally:
            self._write_lock.release()

    def close(self) -> None:
        """Stop the writer and leave a last report behind (called at interpreter exit)."""
        if self._writer is None or self.pid != os.getpid():
            return
        self._stop.set()
        self._writer.join(timeout=1.0)
        self.write(final=True)

    def _start_writer(self) -> None:
        with self._lock:
            if self._writer is not None:
                return
            self._writer = threading.Thread(target=self._run, name="gputop-probe", daemon=True)
        self._writer.start()

    def _run(self) -> None:
        while True:
            self.write()
            if self._stop.wait(self.interval_s):
                return
