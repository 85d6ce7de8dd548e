"""The metrics as a ``.prom`` file for node_exporter's textfile collector, replaced whole at every refresh."""

from __future__ import annotations

import contextlib
from pathlib import Path

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from gputop.files import SHARED, replace_file

TEXTFILE_NAME = "gputop.prom"


def textfile_path(directory: str | Path) -> Path:
    return Path(directory) / TEXTFILE_NAME


def write_textfile(registry: CollectorRegistry, path: Path) -> None:
    """Write the metrics to ``path`` atomically, so a reader never sees half a file. Raises OSError.

    The textfile directory is often shared (node_exporter's), and another user who can write there must not be
    able to make gputop write through a symlink: the bytes go to a new file of a random name made exclusively
    (``.gputop.prom.XXXXXXXX.tmp``, which node_exporter skips as it does not end in ``.prom``), renamed over
    ``path``. Mode 0644: node_exporter often runs as another user, and the file holds no command lines.
    """
    replace_file(path, generate_latest(registry), SHARED)


def remove_textfile(path: Path) -> None:
    """Remove the file when the exporter stops, so node_exporter does not go on serving stale GPU values."""
    with contextlib.suppress(OSError):
        path.unlink()
