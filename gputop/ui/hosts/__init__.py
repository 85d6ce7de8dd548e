"""The multi-host view: ``feed`` (one host's snapshots, history and findings), ``app`` (the view around the
dashboard app, ``run_hosts``), ``screens`` (all hosts, one host's dashboard) and ``section`` (their widgets)."""
