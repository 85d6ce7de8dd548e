"""Wrapping PyTorch's DataLoader iterators, now or as soon as the job imports them.

Three methods of ``_BaseDataLoaderIter`` are wrapped, so every DataLoader, whatever its subclass or worker count,
is seen: ``__init__`` registers the iterator with its loader, ``_reset`` counts a new pass of a persistent
iterator, ``__next__`` times the wait for each batch. ``DataLoader._get_iterator`` is wrapped too, to read the
configuration in effect from the finished iterator (``__init__`` of the base class runs before the workers
start). The wrapped originals run outside any ``try`` of ours, so
their exceptions (``StopIteration``, a worker's error) reach the training loop untouched; the probe's own work
is guarded and only counted when it fails.

The datasets' fetchers (``fetch``: the samples of a batch and their collation) are wrapped to time each batch
inside the worker that makes it (``worker_clock``).

``DataLoader.__init__`` is wrapped to remember the line of the job's code that built the loader
(``created_at``), and ``__next__`` also tells the step tracker (``steps.py``) that a batch was asked for and came:
a step boundary. The per-batch path is two clock reads and a few attribute updates, with no allocation that
outlives it. It reaches the iterator's track by plain attribute access: touching ``iterator.__dict__`` would slow
CPython's fast path for every attribute torch itself reads on the iterator, by more than the probe costs.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import worker_clock
from .loader import CREATED_ATTR
from .probe import TRACK_ATTR, Probe
from .sites import job_site

TARGET = "torch.utils.data.dataloader"
OPTIMIZER = "torch.optim.optimizer"
PATCHED_ATTR = "_gputop_probe_patched"


def patch(module: Any, probe: Probe) -> bool:
    """Wrap the iterators of an imported ``torch.utils.data.dataloader``; False if another probe already did."""
    base = module._BaseDataLoaderIter
    if getattr(base, PATCHED_ATTR, False):
        return False
    base.__init__ = _wrap_init(base.__init__, probe)
    base._reset = _wrap_reset(base._reset)
    base.__next__ = _wrap_next(base.__next__, probe)
    # Subclasses of some torch versions define their own __next__.
    for name in ("_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"):
        cls = getattr(module, name, None)
        if cls is not None and "__next__" in vars(cls):
            cls.__next__ = _wrap_next(cls.__next__, probe)
    fetch = sys.modules.get("torch.utils.data._utils.fetch")
    worker_info = getattr(sys.modules.get("torch.utils.data._utils.worker"), "get_worker_info", None)
    if fetch is not None and worker_info is not None:
        for name in ("_MapDatasetFetcher", "_IterableDatasetFetcher"):
            cls = getattr(fetch, name, None)
            if cls is not None and callable(getattr(cls, "fetch", None)):
                cls.fetch = worker_clock.wrap_fetch(cls.fetch, worker_info)
    module.DataLoader._get_iterator = _wrap_get_iterator(module.DataLoader._get_iterator, probe)
    module.DataLoader.__init__ = _wrap_loader_init(module.DataLoader.__init__, probe)
    setattr(base, PATCHED_ATTR, True)
    return True


def _wrap_init(original: Callable[..., None], probe: Probe) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        original(self, loader, *args, **kwargs)
        try:
            probe.register(loader, self)
        except Exception as exc:
            probe.failed("register loader", exc)
        try:  # the base class's __init__ runs before a multiprocessing iterator forks its workers
            workers = getattr(self, "_num_workers", 0)
            track = getattr(self, TRACK_ATTR, None)
            if type(workers) is int and workers > 0 and track is not None:
                track.workers_clocked(worker_clock.arm(workers))
        except Exception as exc:
            probe.failed("worker clock", exc)

    return __init__


def _wrap_loader_init(original: Callable[..., None], probe: Probe) -> Callable[..., None]:
    """Remember where the job built each DataLoader: the caller of the outermost ``__init__`` of this loader (a
    subclass's ``__init__`` calling ``super().__init__`` is not where the job built it), past torch's frames."""

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            frame = sys._getframe(1)
            while (
                frame.f_back is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is self
            ):
                frame = frame.f_back
            setattr(self, CREATED_ATTR, job_site(frame))
        except Exception as exc:
            probe.failed("loader site", exc)

    return __init__


def _wrap_get_iterator(original: Callable[[Any], Any], probe: Probe) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        iterator = original(self)
        try:
            probe.iterator_built(self, iterator)
        except Exception as exc:
            probe.failed("loader config", exc)
        return iterator

    return _get_iterator


def _wrap_reset(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def _reset(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        original(self, loader, *args, **kwargs)
        first_iter = args[0] if args else kwargs.get("first_iter", False)
        track = getattr(self, TRACK_ATTR, None)
        if track is not None and not first_iter:
            track.start_pass(time.perf_counter())  # a persistent iterator starting its next epoch

    return _reset


def _wrap_next(original: Callable[[Any], Any], probe: Probe) -> Callable[[Any], Any]:
    clock = time.perf_counter
    steps = probe.steps

    @functools.wraps(original)
    def __next__(self: Any) -> Any:
        track = getattr(self, TRACK_ATTR, None)
        if track is None:
            return original(self)
        start = clock()
        if start >= probe.sample_due:
            probe.sample_step(start)
        try:
            steps.batch_requested(start, track.batch_size)
        except Exception as exc:
            probe.failed("step", exc)
        track.waiting_since = start
        try:
            data = original(self)
        except BaseException:
            track.waiting_since = None
            track.passes_ended_at = start  # the end of the loop's last step: a final report's window ends here
            raise
        end = clock()
        track.wait_s += end - start
        track.count += 1
        track.last_end = end
        track.waiting_since = None
        try:
            steps.batch_arrived(end)
        except Exception as exc:
            probe.failed("step", exc)
        if track.pass_started is not None:  # the first batch of a pass; the others pay one attribute test
            track.pass_start_s = end - track.pass_started
            track.pass_start_wait_s += end - start
            track.pass_started = None
        return data

    return __next__


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Acts on torch's modules right after they execute, without importing torch before the job does: patches the
    DataLoader module (``TARGET``) and registers the optimizer step hook once ``OPTIMIZER`` exists.

    It finds a module's spec through the other finders and wraps that one loader's ``exec_module``; it takes
    itself off ``sys.meta_path`` once nothing is left to wait for.
    """

    def __init__(self, probe: Probe, waiting: Iterable[str] = (TARGET, OPTIMIZER)) -> None:
        self.probe = probe
        self.waiting = set(waiting)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.waiting:
            return None
        try:
            return self._patched_spec(fullname, path, target)
        except Exception as exc:
            self.probe.failed("import hook", exc)
            return None

    def _patched_spec(self, fullname: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            self.done(fullname)
            try:
                if fullname == TARGET:
                    patch(module, self.probe)
                else:
                    self.probe.hook_optimizers()
            except Exception as exc:
                self.probe.failed("patch DataLoader" if fullname == TARGET else "optimizer hook", exc)

        loader.exec_module = exec_module
        return spec

    def done(self, fullname: str) -> None:
        self.waiting.discard(fullname)
        if not self.waiting:
            self.remove()

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
