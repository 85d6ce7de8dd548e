"""A launcher's variables in a process's environment: which rank of which job it is.

Read from ``/proc/PID/environ`` (the kernel lets a user read only their own processes' environments) or from the
probe's report, which copies the same variables from inside the process. Only the variables named in ``KEYS`` are
kept: an environment holds tokens and passwords, and nothing else of it is read into gputop, logged or shown.
Each value is checked for its kind (a count, a port, a run id, a host name); a value that fails is left out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from gputop.model import Launch

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
MAX_ENVIRON_BYTES = 1 << 20
"""Environments beyond this are read no further (Linux allows a few MiB; a rank's is a few KiB)."""
MAX_RANKS = 1 << 20
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,253}")
_WANTED = tuple(name.encode() + b"=" for name in KEYS)


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


def read_launch(pid: int) -> Launch | None:
    """The launcher's variables of a process, from its environment as it was at exec; None when there are none
    or the environment cannot be read (another user's process, a process that has exited)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(MAX_ENVIRON_BYTES)
    except OSError:
        return None
    values = {}
    for entry in data.split(b"\0"):
        if entry.startswith(_WANTED):
            name, _, value = entry.partition(b"=")
            values[name.decode()] = value.decode(errors="replace")
    return launch_from(values)


def merged(outside: Launch | None, reported: Launch | None) -> Launch | None:
    """The environment's values, with the probe's filling what the environment did not give."""
    if outside is None or reported is None:
        return outside or reported
    return dataclasses.replace(
        outside,
        **{k: getattr(reported, k) for k in KEYS.values() if getattr(outside, k) is None},
    )
