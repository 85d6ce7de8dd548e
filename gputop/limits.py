"""Bounds that several layers share: the shortest sampling interval, the longest span of time any option takes,
the largest process id. The command line checks its arguments against them; the dashboard's interval keys and the
sampler keep within them."""

MIN_INTERVAL_S = 0.1
"""The shortest time between two snapshots: below it the sampler's own cost is most of what it would show."""
ONE_SHOT_WINDOW_S = 0.12
"""The window over which ``--once`` and ``--json`` measure their rates (CPU %, GPM's SM activity): just over the
100 ms that NVML asks between two GPM samples. ``--help`` says it: it is most of their time."""
MAX_SECONDS = 86_400.0
"""The longest interval, duration or window any option takes: a day. Longer ones are typing mistakes, and past
about 1e10 s they overflow the clocks and timers they reach (``time_t``, ``threading.Event.wait``)."""
MIN_WINDOW_S = 1.0
"""The shortest advisor window an option takes: ``gputop report --pid`` and ``gputop run --headless`` snapshot eight
times a window (``gputop.advisor.report.WINDOW_SAMPLES``), so a shorter one would sample faster than
``MIN_INTERVAL_S`` (``--window 1e-300`` took 700 snapshots a second)."""
MAX_PID = 4_194_304
"""The kernel's ``PID_MAX_LIMIT`` on 64-bit Linux: no process id is larger."""
