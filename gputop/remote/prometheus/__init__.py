"""The multi-host view read from Prometheus (``gputop --prometheus URL``): every host that gputop's exporter or
NVIDIA's dcgm-exporter reports to it, from instant queries of its HTTP API (docs/hosts.md)."""
