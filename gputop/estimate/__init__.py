"""Memory estimates under FakeTensorMode (no GPU needed): a model's training step run for real on tensors that
have sizes but no memory, every live tensor's bytes tracked by part, and the CUDA caching allocator replayed over
them for the reserved memory and what NVML will show (docs/memory.md).

``estimate()`` is the API; ``gputop estimate`` the command. A lazy face: importing the package imports none of
its modules, so the command line takes ``gputop.estimate.defaults`` for its options' help without the estimator;
each name below loads its module when first asked for. No module imports torch until ``estimate()`` runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputop.estimate.api import estimate
    from gputop.estimate.errors import EstimateError
    from gputop.estimate.inputs import InputSpec
    from gputop.estimate.parts import BatchEstimate, LayerRow, Parts
    from gputop.estimate.report import Report

_HOMES = {
    "estimate": "api",
    "EstimateError": "errors",
    "InputSpec": "inputs",
    "BatchEstimate": "parts",
    "LayerRow": "parts",
    "Parts": "parts",
    "Report": "report",
}
"""Each public name and the module that holds it."""

__all__ = ["BatchEstimate", "EstimateError", "InputSpec", "LayerRow", "Parts", "Report", "estimate"]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
