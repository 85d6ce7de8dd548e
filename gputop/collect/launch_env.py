"""A launcher's variables in a process's environment: which rank of which job it is; and whether ``gputop run``
started it, with the probe on.

Read from ``/proc/PID/environ`` (the kernel lets a user read only their own processes' environments) or from the
probe's report, which copies the same variables from inside the process. Only the variables named in ``KEYS`` and
``gputop run``'s two (``PROBE_KEYS``) are kept: an environment holds tokens and passwords, and nothing else of it
is read into gputop, logged or shown. Each value is checked for its kind (a count, a port, a run id, a host name);
a value that fails is left out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import NamedTuple

from gputop.model import Launch
from gputop.probe import channel

KEYS = {
    "RANK": "rank",
    "LOCAL_RANK": "local_rank",
    "WORLD_SIZE": "world_size",
    "LOCAL_WORLD_SIZE": "local_world_size",
    "GROUP_RANK": "group_rank",
    "TORCHELASTIC_RUN_ID": "run_id",
    "MASTER_ADDR": "master_addr",
    "MASTER_PORT": "master_port",
}
"""The variables torchrun (torch.distributed.elastic) sets for each rank, and the ``Launch`` fields they fill."""
PROBE_KEYS = (channel.RUN_ID_ENV, channel.DIR_ENV)
"""What ``gputop run`` sets in its command's environment beside the probe's ``PYTHONPATH``: its run and the
directory the probe reports to."""
MAX_ENVIRON_BYTES = 1 << 20
"""Environments beyond this are read no further (Linux allows a few MiB; a rank's is a few KiB)."""
MAX_RANKS = 1 << 20
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,253}")
_WANTED = tuple(name.encode() + b"=" for name in (*KEYS, *PROBE_KEYS))
MAX_DIR_CHARS = 4096
"""``PATH_MAX``: a longer report directory is no directory a probe could write to."""


class StartEnvironment(NamedTuple):
    """What gputop takes from a process's environment as it was at exec."""

    launch: Launch | None
    """The launcher's variables; None when there are none."""
    probe_dir: str | None
    """The directory the probe reports to, where ``gputop run`` started the process (it sets ``$GPUTOP_RUN_ID``
    and ``$GPUTOP_PROBE_DIR``); None for a process it did not start."""


def launch_from(values: Mapping[str, object]) -> Launch | None:
    """A ``Launch`` from the launcher's variables, or None when none of them is set (or valid)."""
    numbers = {name: _count(values.get(name), 65535 if name == "MASTER_PORT" else MAX_RANKS) for name in KEYS}
    run_id = _matching(values.get("TORCHELASTIC_RUN_ID"), _RUN_ID)
    master_addr = _matching(values.get("MASTER_ADDR"), _HOST)
    if run_id is None and master_addr is None and all(n is None for n in numbers.values()):
        return None
    return Launch(
        rank=numbers["RANK"],
        local_rank=numbers["LOCAL_RANK"],
        world_size=numbers["WORLD_SIZE"],
        local_world_size=numbers["LOCAL_WORLD_SIZE"],
        group_rank=numbers["GROUP_RANK"],
        run_id=run_id,
        master_addr=master_addr,
        master_port=numbers["MASTER_PORT"] or None,
    )


def _count(value: object, top: int) -> int | None:
    if not isinstance(value, str) or not (value.isascii() and value.isdigit() and len(value) <= 7):
        return None
    number = int(value)
    return number if number <= top else None


def _matching(value: object, pattern: re.Pattern[str]) -> str | None:
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def read_environment(pid: int) -> StartEnvironment:
    """The launcher's variables of a process and the probe directory ``gputop run`` gave it, from its environment
    as it was at exec; neither when the environment cannot be read (another user's process, one that has exited)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(MAX_ENVIRON_BYTES)
    except OSError:
        return StartEnvironment(None, None)
    values = {}
    for entry in data.split(b"\0"):
        if entry.startswith(_WANTED):
            name, _, value = entry.partition(b"=")
            values[name.decode()] = value.decode(errors="replace")
    return StartEnvironment(launch_from(values), _probe_dir(values))


def _probe_dir(values: Mapping[str, str]) -> str | None:
    directory = values.get(channel.DIR_ENV)
    if not values.get(channel.RUN_ID_ENV) or not directory or len(directory) > MAX_DIR_CHARS:
        return None
    return directory


def merged(outside: Launch | None, reported: Launch | None) -> Launch | None:
    """The environment's values, with the probe's filling what the environment did not give."""
    if outside is None or reported is None:
        return outside or reported
    return dataclasses.replace(
        outside,
        **{k: getattr(reported, k) for k in KEYS.values() if getattr(outside, k) is None},
    )
