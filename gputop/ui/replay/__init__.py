"""``gputop replay FILE``: the dashboard over a recording, with a timeline.

``source`` reads the recording (``ReplaySource``) and ``findings`` runs the advisor over all of it; neither imports
Textual. ``player`` is the replay's feed and mode for the dashboard app (play and pause, speed, steps and jumps,
paced by the recorded times), ``screen`` its dashboard with the timeline bar, ``jump`` the ``g`` input and ``app``
runs it all (``run_replay``).
"""
