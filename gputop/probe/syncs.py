"""Hidden host–device syncs: where the job's code makes the host wait for the GPU, on sampled steps.

On one step in ``SAMPLE_EVERY`` (CUDA only) the probe turns on torch's sync debug mode
(``torch.cuda.set_sync_debug_mode("warn")``), which warns at every operation that waits for the GPU, and turns it
back to what it was at the next step boundary. The mode costs about 15 % of a step (docs/benchmarks.md, "Measured
on a real GPU"), so on one step in 50 it costs 0.3 %. The warnings are caught by a wrapper of
``warnings.showwarning``, installed once and never removed (``warnings.catch_warnings`` is not thread-safe): it
keeps the sync warnings of a sampled step to itself and hands every other warning to the function it replaced. A
filter put first makes those warnings ``always`` shown to it, whatever the job's filters (``-W error`` would
otherwise raise them into the loop). Each is attributed to the first frame of the job's own code (``sites``) and
to the call that waited, read from torch's frame (``Tensor.__bool__``: ``bool``) or the job's line (``.item()``).
"""

from __future__ import annotations

import linecache
import re
import sys
import warnings
from collections.abc import Iterable
from typing import Any

from .sites import Frame, first_job_frame, library_dirs, name_site, stack
from .steps import NEVER

SAMPLE_EVERY = 50
MAX_SITES = 8
MESSAGE = "called a synchronizing CUDA operation"
MAX_KEYS = 256
"""Distinct (site, call) pairs kept: a job that syncs in a loop over many lines does not grow the probe."""

TORCH_FUNCTIONS = {
    "__bool__": "bool",
    "__int__": "int",
    "__float__": "float",
    "__index__": "int",
    "__repr__": "print",
    "__str__": "print",
    "__format__": "print",
    "tolist": "tolist",
    "item": "item",
    "synchronize": "synchronize",
    "nonzero": "nonzero",
}
"""torch's Python functions that sync, by name, and the call they stand for."""
CALL_IN_LINE = re.compile(
    r"\.(item|cpu|tolist|numpy|nonzero|synchronize|to|masked_select|unique|any|all)\s*\(|"
    r"\b(print|float|int|bool)\s*\(|^\s*(if|elif|while|assert)\b"
)


def call_of(torch_functions: Iterable[str], line: str) -> str:
    """The call that waited: from torch's frames (innermost first) where one names it, else from the job's line,
    else ``sync``."""
    for function in torch_functions:
        if function in TORCH_FUNCTIONS:
            return TORCH_FUNCTIONS[function]
    found = CALL_IN_LINE.search(line)
    if found is None:
        return "sync"
    name = next(group for group in found.groups() if group)
    return "bool" if name in ("if", "elif", "while", "assert") else name


class SyncSampler:
    """Counts the syncs of sampled steps; ``report()`` gives the report's sync fields."""

    def __init__(self, failed: Any) -> None:
        self.failed = failed
        self.enabled = False
        """True once CUDA is initialised in the process: syncs only exist there."""
        self.active = False
        self.sampled_steps = 0
        self.counts: dict[tuple[str, str], int] = {}
        self.total = 0
        self.previous_mode: Any = 0
        self._shown: Any = None
        self._installed = False
        self._next_due = 0

    @property
    def next_due(self) -> int:
        return self._next_due if self.enabled else NEVER

    def due(self, steps: int) -> bool:
        if not self.enabled or steps < self._next_due:
            return False
        self._next_due = steps + SAMPLE_EVERY
        return True

    def begin(self) -> None:
        try:
            cuda = sys.modules["torch"].cuda
            if not self._installed:
                self._install()
            self.previous_mode = cuda.get_sync_debug_mode()
            cuda.set_sync_debug_mode("warn")
            self.active = True
        except Exception as exc:
            self.failed("sync debug mode", exc)

    def end(self) -> None:
        if not self.active:
            return
        self.active = False
        self.sampled_steps += 1
        try:
            sys.modules["torch"].cuda.set_sync_debug_mode(self.previous_mode)
        except Exception as exc:
            self.failed("sync debug mode", exc)

    def _install(self) -> None:
        self._shown = warnings.showwarning
        warnings.filterwarnings("always", message=re.escape(MESSAGE))
        warnings.showwarning = self._showwarning
        self._installed = True

    def _showwarning(
        self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: str | None = None
    ) -> None:
        if MESSAGE not in str(message):
            self._shown(message, category, filename, lineno, file, line)
            return
        if not self.active:  # the job's own sync debug mode
            self._shown(message, category, filename, lineno, file, line)
            return
        try:
            self.seen(stack(sys._getframe(1)))
        except Exception as exc:
            self.failed("sync site", exc)

    def seen(self, frames: list[Frame], dirs_given: tuple[str, ...] | None = None) -> None:
        """One sync, with the stack it happened in (innermost first), the warnings module's frames included."""
        dirs = (library_dirs() if dirs_given is None else dirs_given) + (warnings.__file__,)
        found = first_job_frame(frames, dirs)
        self.total += 1
        if found is None:
            key = ("torch", "sync")
        else:
            filename, lineno, _ = frames[found]
            names = [function for _, _, function in frames[:found]]
            key = (name_site(filename, lineno), call_of(names, linecache.getline(filename, lineno)))
        if key in self.counts or len(self.counts) < MAX_KEYS:
            self.counts[key] = self.counts.get(key, 0) + 1

    def report(self) -> dict[str, Any]:
        if not self.enabled:
            reason = "no CUDA in this process: the host never waits for a GPU"
            return {
                "syncs_per_step": None,
                "sync_sites": [],
                "sync_sampled_steps": 0,
                "unavailable": {"syncs_per_step": reason},
            }
        if not self.sampled_steps:
            return {
                "syncs_per_step": None,
                "sync_sites": [],
                "sync_sampled_steps": 0,
                "unavailable": {"syncs_per_step": "no step sampled yet"},
            }
        sites = sorted(self.counts.items(), key=lambda item: -item[1])[:MAX_SITES]
        return {
            "syncs_per_step": self.total / self.sampled_steps,
            "sync_sites": [
                {"site": site, "call": call[:40], "per_step": count / self.sampled_steps}
                for (site, call), count in sites
            ],
            "sync_sampled_steps": self.sampled_steps,
            "unavailable": {},
        }
