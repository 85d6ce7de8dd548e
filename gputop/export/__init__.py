"""``gputop export``: the snapshot as Prometheus metrics, served over HTTP or written as a textfile.

``metrics`` maps a snapshot to metric families (pure), ``collector`` hands the sampler's latest snapshot to
prometheus-client at each scrape, ``server`` and ``textfile`` are the two ways out, ``exporter`` runs them. This
module holds the default address alone, so that the command line's help names it without importing the rest.
"""

DEFAULT_PORT = 24400
"""No GPU or host exporter's: dcgm-exporter, on every node of NVIDIA's GPU Operator, takes 9400; Prometheus's list
of exporter ports, full from 9100 to 9999, has other GPU exporters at 9401, 9445, 9454, 9788, 9835, 9971 and 9996
and node_exporter at 9100. Also clear of Ray's worker ports (10002-19999), torchrun's rendezvous and master ports
(29400, 29500), Kubernetes' node ports (30000-32767) and the kernel's ephemeral ports (32768 and up)."""
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
