"""Torch's hooks and wrappers that mark the forward and backward passes and the optimizer step for ``StepTracker``.

- forward: torch's global module forward pre and post hooks (``register_module_forward_pre_hook``,
  ``register_module_forward_hook(always_call=True)``, so an exception still ends the phase), installed for sampled
  steps only; the outermost module call is the phase, nested ones only count depth. They return at once while
  dynamo traces them (``torch.compiler.is_compiling()``), so a compiled model's graph holds nothing of them.
- backward: a wrapper of ``torch.autograd.backward``, which ``Tensor.backward`` calls: the time it runs, an exact
  measure of the backward pass for two clock reads a step, where the gap from the forward's end to the optimizer's
  start would also take in the loss, logging and ``zero_grad``. Autograd's own hooks are per tensor: no global one
  marks the start of a backward pass.
- DDP's gradient all-reduce runs inside the backward pass, from C++ (its reducer), where no wrapper reaches: the
  first time a ``DistributedDataParallel`` model runs its forward, one hook is put on its first parameter
  (``register_post_accumulate_grad_hook``); that parameter's gradient is, in a model whose layers run in order,
  the last one the backward pass computes, so from that hook to the end of ``backward()`` the rank waits for the
  gradients' all-reduce: that time is ``collective``.
- optimizer: torch's global optimizer step pre and post hooks (``precision.hook_optimizers``).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from typing import Any

from .phases import BACKWARD, PHASE_NAMES
from .steps import StepTracker

PATCHED_ATTR = "_gputop_probe_patched"
Failed = Callable[[str, BaseException], None]


def compiling_check(torch: Any) -> Callable[[], bool]:
    """``torch.compiler.is_compiling``, or a function that says no where this torch lacks it."""
    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return check if callable(check) else (lambda: False)


def install(tracker: StepTracker, failed: Failed, in_forward: Callable[[], None] = lambda: None) -> None:
    """Give the tracker its forward hooks and wrap ``torch.autograd.backward``; the job has imported torch.
    ``in_forward`` is called inside each timed outermost forward (where the job's autocast is in effect)."""
    torch = sys.modules["torch"]
    is_compiling = compiling_check(torch)
    module_module = sys.modules["torch.nn.modules.module"]
    tracker.forward_hooks = _forward_hooks(tracker, failed, is_compiling, module_module, in_forward)
    autograd = torch.autograd
    if not getattr(autograd.backward, PATCHED_ATTR, False):
        autograd.backward = wrap_phase(autograd.backward, BACKWARD, tracker, failed, is_compiling)


def _forward_hooks(
    tracker: StepTracker,
    failed: Failed,
    is_compiling: Callable[[], bool],
    module_module: Any,
    in_forward: Callable[[], None],
) -> Callable[[bool], None]:
    ddp_seen: weakref.WeakSet[Any] = weakref.WeakSet()

    def pre(module: Any, args: Any) -> None:
        if is_compiling():
            return
        try:
            tracker.forward_pre(module, args)
            if tracker.forward_depth == 1:
                in_forward()
            ddp = tracker.forward_depth == 1 and type(module).__name__ == "DistributedDataParallel"
            if ddp and module not in ddp_seen:
                ddp_seen.add(module)
                _hook_gradients(module, tracker, failed)
        except Exception as exc:
            failed("forward hook", exc)

    def post(module: Any, args: Any, output: Any) -> None:
        if is_compiling():
            return
        try:
            tracker.forward_post(module, args, output)
        except Exception as exc:
            failed("forward hook", exc)

    handles: list[Any] = []

    def switch(on: bool) -> None:
        if on and not handles:
            handles.append(module_module.register_module_forward_pre_hook(pre))
            try:
                handles.append(module_module.register_module_forward_hook(post, always_call=True))
            except TypeError:  # a torch without always_call: the next step boundary resets the depth
                handles.append(module_module.register_module_forward_hook(post))
        elif not on:
            for handle in handles:
                handle.remove()
            handles.clear()

    return switch


def _hook_gradients(model: Any, tracker: StepTracker, failed: Failed) -> None:
    first = next((p for p in model.parameters() if p.requires_grad), None)
    register = getattr(first, "register_post_accumulate_grad_hook", None)  # torch 2.1 and later
    if register is None:
        return

    def ready(parameter: Any) -> None:
        try:
            tracker.gradients_ready()
        except Exception as exc:
            failed("gradient hook", exc)

    register(ready)


def wrap_phase(
    original: Callable[..., Any],
    phase: int,
    tracker: StepTracker,
    failed: Failed,
    is_compiling: Callable[[], bool],
) -> Callable[..., Any]:
    """``original``, timed as ``phase`` on sampled steps: the probe's own work is guarded, ``original`` is not (its
    exceptions reach the job as they are)."""
    where = PHASE_NAMES[phase]

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if not tracker.sampled or is_compiling():
            return original(*args, **kwargs)
        entered = False
        try:
            tracker.enter(phase)
            entered = True
        except Exception as exc:
            failed(where, exc)
        try:
            return original(*args, **kwargs)
        finally:
            if entered:
                try:
                    tracker.leave()
                except Exception as exc:
                    failed(where, exc)

    setattr(timed, PATCHED_ATTR, True)
    return timed
