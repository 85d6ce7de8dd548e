"""The metrics as a ``.prom`` file for node_exporter's textfile collector, replaced whole at every refresh."""

from __future__ import annotations

import contextlib
from pathlib import Path

from prometheus_client import write_to_textfile
from prometheus_client.registry import CollectorRegistry

TEXTFILE_NAME = "gputop.prom"


def textfile_path(directory: str | Path) -> Path:
    return Path(directory) / TEXTFILE_NAME


def write_textfile(registry: CollectorRegistry, path: Path) -> None:
    """Write the metrics to ``path`` atomically, so a reader never sees half a file.

    prometheus-client writes a temporary file beside it (``gputop.prom.PID.THREAD``, which node_exporter skips
    as it does not end in ``.prom``) and renames it over ``path``. Raises OSError.
    """
    write_to_textfile(str(path), registry)


def remove_textfile(path: Path) -> None:
    """Remove the file when the exporter stops, so node_exporter does not go on serving stale GPU values."""
    with contextlib.suppress(OSError):
        path.unlink()
