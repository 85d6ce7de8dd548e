"""Memory estimates under FakeTensorMode (no GPU needed): a model's training step run for real on tensors that
have sizes but no memory, every live tensor's bytes tracked by part, and the CUDA caching allocator replayed over
them for the reserved memory and what NVML will show (docs/memory.md).

``estimate()`` is the API; ``gputop estimate`` the command. Importing this package imports no torch: the modules
that run the step do, when ``estimate()`` is called.
"""

from __future__ import annotations

from gputop.estimate.api import estimate
from gputop.estimate.errors import EstimateError
from gputop.estimate.inputs import InputSpec
from gputop.estimate.parts import BatchEstimate, LayerRow, Parts
from gputop.estimate.report import Report

__all__ = ["BatchEstimate", "EstimateError", "InputSpec", "LayerRow", "Parts", "Report", "estimate"]
