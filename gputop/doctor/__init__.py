"""``gputop doctor``: why a value reads N/A and what limits gputop on this machine, with what to do about each.

``checks.run()`` makes the checks (``result.Check``, one verdict each); ``render`` turns the ``result.Report``
into text or a JSON document.
"""
