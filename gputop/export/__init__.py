"""``gputop export``: the snapshot as Prometheus metrics, served over HTTP or written as a textfile.

``metrics`` maps a snapshot to metric families (pure), ``collector`` hands the sampler's latest snapshot to
prometheus-client at each scrape, ``server`` and ``textfile`` are the two ways out, ``exporter`` runs them.
"""
