"""The process tree of training jobs: which processes are training processes, and whose workers are whose.

Built each tick from the host collector's view of the watched processes (name, parent, command line):

- a worker is a process torch named ``pt_data_worker``, or a PID a probe reported as a worker (spawn and
  forkserver workers take the name only after re-importing the main module, a second or more after they start);
- a worker belongs to its parent, or, with the forkserver start method, to the fork server's parent: workers are
  searched through the whole subtree because the start method decides where they sit;
- below the roots (the focus and the GPU processes), a training process is an owner of workers, a process torch
  named ``pt_main_thread``, a process with a probe report, or a child of a torchrun agent (``pt_elastic``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gputop.model import TORCH_MAIN_THREAD, HostProcess

WORKER_NAME = "pt_data_worker"
MAIN_THREAD_NAME = TORCH_MAIN_THREAD
AGENT_NAME = "pt_elastic"
FORKSERVER_MARK = "multiprocessing.forkserver"
SPAWN_MARK = "multiprocessing.spawn"


def start_method_of(worker: HostProcess) -> str | None:
    """How a worker was started, from its command line: forkserver and spawn children run a ``-c`` stub."""
    if worker.command is None:
        return None
    if FORKSERVER_MARK in worker.command:
        return "forkserver"
    if SPAWN_MARK in worker.command:
        return "spawn"
    return "fork"


class JobTree:
    """The live part of the watched process tree, with the questions the collector asks of it."""

    def __init__(self, hosts: Mapping[int, HostProcess], probed_workers: set[int]) -> None:
        """``probed_workers`` are PIDs a probe named as workers: spawn and forkserver workers take their name only
        after re-importing the main module, a second or more after they start."""
        self.parent = {pid: h.ppid for pid, h in hosts.items() if h.ppid is not None}
        self.alive = {pid: hosts[pid] for pid in self.parent}
        self.probed_workers = probed_workers
        self.children: dict[int, list[int]] = {}
        for pid, ppid in self.parent.items():
            self.children.setdefault(ppid, []).append(pid)
        self.workers = [pid for pid in sorted(self.alive) if self.is_worker(pid)]
        self._owner = {w: self._find_owner(w) for w in self.workers}

    def is_worker(self, pid: int) -> bool:
        return self.alive[pid].name == WORKER_NAME or pid in self.probed_workers

    def is_fork_server(self, pid: int) -> bool:
        return not self.is_worker(pid) and FORKSERVER_MARK in (self.alive[pid].command or "")

    def _find_owner(self, worker: int) -> int | None:
        parent = self.alive[worker].ppid
        while parent in self.alive and self.is_fork_server(parent):
            parent = self.alive[parent].ppid
        return parent

    def workers_of(self, pid: int) -> list[int]:
        return [w for w in self.workers if self._owner[w] == pid]

    def ancestors(self, pid: int) -> Iterable[int]:
        seen = {pid}
        parent = self.alive[pid].ppid if pid in self.alive else None
        while parent in self.alive and parent not in seen:
            yield parent
            seen.add(parent)
            parent = self.alive[parent].ppid

    def training_processes(self, roots: list[int], reporting: set[int]) -> set[int]:
        """The roots, and the training processes below them; ``reporting`` are the PIDs with a probe report."""
        found = set(roots)
        below = set()
        for root in roots:
            stack = list(self.children.get(root, ()))
            while stack:
                pid = stack.pop()
                if pid not in below and pid not in roots:
                    below.add(pid)
                    stack.extend(self.children.get(pid, ()))
        for pid in below:
            if self.is_worker(pid) or self.is_fork_server(pid):
                continue
            host = self.alive[pid]
            parent = self.alive.get(self.parent[pid])
            rank = parent is not None and parent.name == AGENT_NAME
            if rank or host.name == MAIN_THREAD_NAME or pid in reporting:
                found.add(pid)
        found.update(o for o in self._owner.values() if o is not None and (o in found or o in below))
        return found

    def training_parent(self, pid: int, training: set[int]) -> int | None:
        """The nearest training process above ``pid``: the one whose ``ranks`` list it."""
        return next((a for a in self.ancestors(pid) if a in training), None)

    def training_parents(self, training: set[int]) -> dict[int, int]:
        """``training_parent`` of every training process that has one, walking each ancestor once for all of them
        (dozens of GPU processes under one launcher share every ancestor up to init)."""
        above: dict[int, int | None] = {}  # a process -> the nearest training process at or above it

        def nearest(pid: int | None) -> int | None:
            chain = []
            while pid is not None and pid in self.alive and pid not in above and pid not in training:
                chain.append(pid)
                pid = self.alive[pid].ppid
                if pid in chain:  # a cycle in a torn read of the process table
                    pid = None
            found = above.get(pid) if pid in above else (pid if pid in training else None)
            for walked in chain:
                above[walked] = found
            return found

        parents = {}
        for pid in training:
            parent = nearest(self.alive[pid].ppid) if pid in self.alive else None
            if parent is not None and parent != pid:
                parents[pid] = parent
        return parents
