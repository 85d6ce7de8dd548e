"""Real processes for the fake driver's process lists: ``sleep`` processes in one process group, all killed
together on the way out, even when the benchmark fails part way."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator


class Sleepers:
    """Sleeping processes in one process group; ``spawn`` adds some, ``end`` kills some, ``close`` all.

    The group's leader is one more sleeper that lives until ``close``: a process can only join a group whose
    leader is still there."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        self._leader = subprocess.Popen(["sleep", "3600"], process_group=0)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def spawn(self, count: int) -> list[int]:
        started = [subprocess.Popen(["sleep", "3600"], process_group=self._leader.pid) for _ in range(count)]
        self.processes.extend(started)
        return [p.pid for p in started]

    def end(self, count: int) -> list[int]:
        """Kill the ``count`` oldest; returns their PIDs."""
        ended, self.processes = self.processes[:count], self.processes[count:]
        for process in ended:
            process.kill()
            process.wait()
        return [p.pid for p in ended]

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._leader.pid, signal.SIGKILL)
        for process in [self._leader, *self.processes]:
            process.wait()
        self.processes = []


@contextlib.contextmanager
def sleepers(count: int) -> Iterator[Sleepers]:
    group = Sleepers()
    try:
        group.spawn(count)
        yield group
    finally:
        group.close()
