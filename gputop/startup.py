"""The cyclic garbage collector while ``gputop`` starts: held off while the modules are imported and the first
frame is made, then everything made so far frozen and collection resumed.

Launching the dashboard makes about 114,000 objects that live as long as the process (modules, classes, the
stylesheet, the widgets). While they are made the collector runs about 180 times, a full pass over all of them
among those, 33 to 46 ms of the half second before the first frame with data. Made with collection held, they are
then moved to the permanent generation (``gc.freeze``), which later passes do not scan either. What only the
collector could free is kept instead: reference cycles that became garbage before the freeze, and those that the
frozen objects form when they are dropped later (the first footer's keys, say). Both are bounded by what the start
made, once; what is made after the freeze is collected as before.

Only the ``gputop`` command holds it (``gputop.cli.entry``); Python code that calls ``main`` keeps its collector as
it is, and ``resume`` then does nothing.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """No cyclic collection until ``resume``."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def resume() -> None:
    """Freeze what was made while collection was held and collect again from now on (nothing if ``hold`` did
    not hold it)."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
