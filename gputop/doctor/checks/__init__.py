"""The checks of ``gputop doctor``, one module per subject, each check a function that returns a ``Check``.

``driver`` (the driver, NVML, persistence mode and start-up time), ``gpus`` (each GPU, its process lists, MIG,
GPM), ``system`` (``/proc`` and the PID namespace), ``unreadable`` (a snapshot's N/A values), ``probe_dir``,
``pytorch`` and ``installation``. ``doctor.runner`` runs them in their order, each isolated.
"""

from __future__ import annotations
