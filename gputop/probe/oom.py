"""When a CUDA job runs out of memory: a report of what held the GPU at that moment, written as it happens.

Once the job has initialised CUDA, the probe attaches an observer to PyTorch's caching allocator, which calls it
the moment an allocation fails (before ``torch.OutOfMemoryError`` is raised, so also for a job that catches it and
retries with a smaller batch). The observer takes the allocator's snapshot (``torch.cuda.memory._snapshot()``: every
segment and block) and writes ``oom-<pid>-<n>.json`` beside the probe's reports: the bytes requested and free, what
the allocator held (allocated, cached in free blocks, the largest free block), the parts the probe's last walk of
the optimizers found (weights, gradients, optimizer state; the rest is the step's activations and temporaries), the
largest allocations with the code that made them, and the change that would fit.

The code that made each allocation is only known where the allocator recorded its history: the probe turns that on
(``torch.cuda.memory._record_memory_history`` with Python stacks, the last ``MAX_ENTRIES`` actions kept) only when
the job asks with ``GPUTOP_OOM_HISTORY=1``: it costs every allocation a stack walk. Without it the report has the
blocks and sizes, no frames. Nothing here raises into the training loop: a failure is counted by the probe.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

ENV = "GPUTOP_OOM_HISTORY"
MAX_ENTRIES = 20_000
"""The allocator's last actions kept with their stacks: a few steps of a model with hundreds of tensors."""
MAX_REPORTS = 3
"""A job that catches the error and retries writes at most this many reports."""
TOP = 10
MAX_FRAMES = 6
MAX_TEXT = 300

Failed = Callable[[str, BaseException], None]


class OomWatch:
    """The allocator's observer for one process.

    Args:
        directory: where the reports go (the probe's report directory).
        parts: the last walk's per-device weights, gradients and optimizer state (``TensorReader.devices``).
        failed: counts a failure in the probe's report.
    """

    def __init__(self, directory: str, parts: Callable[[], list[dict[str, Any]] | None], failed: Failed) -> None:
        self.directory = directory
        self.parts = parts
        self.failed = failed
        self.started = False
        self.history = False
        self.written: list[str] = []
        self._torch: Any = None

    def start(self, torch: Any) -> None:
        """Attach the observer (and record the history when asked); once, after CUDA is initialised."""
        if self.started:
            return
        self.started = True
        try:
            self._torch = torch
            if os.environ.get(ENV) == "1":
                torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
                self.history = True
            torch._C._cuda_attach_out_of_memory_observer(self.observed)
        except Exception as exc:
            self.failed("oom watch", exc)

    def observed(self, device: int, requested: int, device_allocated: int, device_free: int) -> None:
        """The allocator's call as an allocation fails: the report, written now."""
        if len(self.written) >= MAX_REPORTS:
            return
        try:
            torch = self._torch
            snapshot = torch.cuda.memory._snapshot()
            total = torch.cuda.get_device_properties(device).total_memory
            report = oom_report(snapshot, device, requested, device_free, total, self.parts())
            self.written.append(write(self.directory, os.getpid(), len(self.written) + 1, report))
        except Exception as exc:
            self.failed("oom report", exc)


def write(directory: str, pid: int, serial: int, report: dict[str, Any]) -> str:
    """``oom-<pid>-<serial>.json`` in ``directory``, created new and private; its path."""
    from .channel import ensure_dir

    problem = ensure_dir(directory)
    if problem:
        raise PermissionError(problem)
    path = os.path.join(directory, f"oom-{pid}-{serial}.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(report, indent=1, allow_nan=False).encode())
    finally:
        os.close(fd)
    return path


def oom_report(
    snapshot: dict[str, Any],
    device: int,
    requested: int,
    device_free: int,
    device_total: int | None,
    parts: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """What held ``device`` when an allocation of ``requested`` bytes failed, from the allocator's ``snapshot``.

    ``parts`` are the probe's per-device weights, gradients and optimizer state (None: no optimizer walked yet)."""
    segments = [s for s in snapshot.get("segments", ()) if isinstance(s, dict) and s.get("device", device) == device]
    blocks = [b for s in segments for b in s.get("blocks", ()) if isinstance(b, dict)]
    allocated = [b for b in blocks if b.get("state") == "active_allocated"]
    free = [_int(b.get("size")) for b in blocks if b.get("state") == "inactive"]
    allocated_bytes = sum(_int(b.get("size")) for b in allocated)
    held = _parts(parts, device, allocated_bytes)
    largest = sorted(allocated, key=lambda b: -_int(b.get("size")))[:TOP]
    report: dict[str, Any] = {
        "device": device,
        "requested_bytes": requested,
        "device_free_bytes": device_free,
        "device_total_bytes": device_total,
        "reserved_bytes": sum(_int(s.get("total_size")) for s in segments),
        "allocated_bytes": allocated_bytes,
        "cached_free_bytes": sum(free),
        "largest_free_block_bytes": max(free, default=0),
        "parts": held,
        "largest": [{"bytes": _int(b.get("size")), "made_at": _frames(b.get("frames"))} for b in largest],
        "history": any(b.get("frames") for b in allocated),
    }
    report["fix"] = fix(report)
    return report


def _parts(parts: list[dict[str, Any]] | None, device: int, allocated: int) -> dict[str, int] | None:
    """The device's weights, gradients and optimizer state at the last walk, and the rest of what is allocated."""
    found = next((p for p in parts or () if p.get("device") == f"cuda:{device}"), None)
    if found is None:
        return None
    state = {key: _int(found.get(f"{key}_bytes")) for key in ("weights", "gradients", "optimizer")}
    return {**state, "activations_and_temporaries": max(0, allocated - sum(state.values()))}


def _frames(frames: Any) -> list[str]:
    """Where an allocation was made, the job's own code first: ``file:line in function``, torch's frames left out
    where any others remain."""
    if not isinstance(frames, list):
        return []
    shown = [
        f"{_text(f.get('filename'))}:{_int(f.get('line'))} in {_text(f.get('name'))}"
        for f in frames
        if isinstance(f, dict)
    ]
    own = [s for s in shown if "/torch/" not in s and not s.startswith("??")]
    return (own or shown)[:MAX_FRAMES]


def fix(report: dict[str, Any]) -> list[str]:
    """The change that would make the failed allocation fit, in words."""
    requested, free = report["requested_bytes"], report["device_free_bytes"]
    cached, largest_free = report["cached_free_bytes"], report["largest_free_block_bytes"]
    short = requested - free - cached
    if short <= 0:
        return [
            f"fragmentation: {cached:,} bytes are cached in free blocks (the largest {largest_free:,}) and "
            f"{free:,} free on the device, but no block of {requested:,}: "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets them join"
        ]
    lines = [f"{short:,} bytes more than the GPU has free and cached were needed"]
    parts = report["parts"]
    rest = None if parts is None else parts["activations_and_temporaries"]
    if rest and rest > short:
        share = 1 - short / rest
        lines.append(
            f"activations and temporaries hold {rest:,} bytes: a batch of about {share:.0%} of this one would fit "
            "if they scale with it (or activation checkpointing)"
        )
    if parts is not None and parts["optimizer"] > short:
        lines.append(f"or shard the optimizer state ({parts['optimizer']:,} bytes: ZeRO-1 / FSDP over more GPUs)")
    return lines


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _text(value: Any) -> str:
    """A snapshot's string bounded, non-strings as ``??``."""
    return value[:MAX_TEXT] if isinstance(value, str) else "??"
