"""gputop's in-process probe: reports what a training job's DataLoaders, optimizers and GPU memory are doing.

Use it from the job itself::

    import gputop.probe
    gputop.probe.install()

or start the job with ``gputop run -- python train.py``, which installs it without a change to the code. The probe
needs only the standard library and torch, and importing it never imports torch: where torch is absent, or
until the job imports ``torch.utils.data`` and ``torch.optim``, it waits. It writes one small JSON report per
process (see ``channel``) a few times a second, never raises into the training loop, and costs a few
microseconds per step, where it also times the step's phases (``steps``).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .probe import Probe

__all__ = ["install", "installed"]

_probe: Probe | None = None


def install(directory: str | None = None) -> bool:
    """Start reporting this process's DataLoaders; True when this call or an earlier one installed the probe.

    ``directory`` overrides where reports go (default: ``channel.report_dir()``). Never raises.
    """
    global _probe
    if _probe is not None:
        return True
    # Imported here, not with the package: the monitor imports the package for ``channel`` and needs neither.
    # A failure to import them is raised, as it was from importing the package.
    from .hooks import OPTIMIZER, TARGET, PatchOnImport, patch
    from .probe import Probe

    try:
        probe = Probe(directory)
        module = sys.modules.get(TARGET)
        if module is not None and not patch(module, probe):
            return False  # another copy of the probe (gputop run's) already reports this process
        if OPTIMIZER in sys.modules:
            probe.hook_optimizers()
        waiting = [name for name in (TARGET, OPTIMIZER) if name not in sys.modules]
        if waiting:
            sys.meta_path.insert(0, PatchOnImport(probe, waiting))
        os.register_at_fork(after_in_child=probe.reset)
        atexit.register(probe.close)
        _probe = probe
        return True
    except Exception:
        return False


def installed() -> Probe | None:
    """The probe of this process, if ``install`` has run."""
    return _probe
