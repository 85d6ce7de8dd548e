"""``gputop doctor``: why a value reads N/A and what limits gputop on this machine, with what to do about each.

``runner.run()`` makes the checks (``checks/``, one module per subject, each check a ``result.Check`` with its
verdict) in the order they are shown; ``render`` turns the ``result.Report`` into text or a JSON document. What
the doctor asks of the collector goes through its public functions (``collect.nvml.process_list_access``,
``gpm_support``, ``errors.reason_of``), so that it says what the dashboard shows.
"""
