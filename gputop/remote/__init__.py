"""The multi-host view's connections (docs/hosts.md): which hosts (``hosts``), the state of each connection and
why it ended (``status``), one ssh or in-process link per host (``link``), a host's stdout made into snapshots
within bounds (``stream``), all of them together (``fleet``), and the command-line options (``options``). Nothing
is imported here, so the command line stays quick to start."""
