"""A process tree shaped like a training job, without torch: processes and threads named as torch names them.

``named_tree.py LAYOUT`` where LAYOUT is one of:

- ``workers``: this process (the "training process") with two children named ``pt_data_worker``;
- ``pinned``: as ``workers``, plus a thread of this process named ``pt_data_pin``;
- ``torchrun``: this process named ``pt_elastic`` (the torchrun agent) with two children named ``pt_main_thread``
  (the ranks), each with two ``pt_data_worker`` children;
- ``alone``: no workers, no pin thread.

Names are set with ``prctl(PR_SET_NAME)`` on the calling thread, which is what torch's ``_set_thread_name`` does.
Prints one line, ``ready PID...`` (this process, then every child in start order), and sleeps until killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)


def set_name(name: str) -> None:
    if libc.prctl(PR_SET_NAME, name.encode(), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def fork(name: str, then: Callable[[], list[int]] | None = None) -> list[int]:
    """A child that names itself, runs ``then`` and sleeps (dying with its parent); returns its PID and those
    ``then`` started."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        set_name(name)
        started = then() if then else []
        os.write(write_end, " ".join(map(str, started)).encode() + b"\n")
        os.close(write_end)
        while True:
            time.sleep(60)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        grandchildren = [int(p) for p in pipe.readline().split()]
    return [pid, *grandchildren]


def two_workers() -> list[int]:
    return fork("pt_data_worker") + fork("pt_data_worker")


def pin_thread(started: threading.Event) -> None:
    set_name("pt_data_pin")
    started.set()
    while True:
        time.sleep(60)


def main() -> None:
    layout = sys.argv[1]
    children: list[int] = []
    if layout in ("workers", "pinned"):
        children = two_workers()
    if layout == "pinned":
        started = threading.Event()
        threading.Thread(target=pin_thread, args=(started,), daemon=True).start()
        started.wait()
    if layout == "torchrun":
        set_name("pt_elastic")
        children = fork("pt_main_thread", two_workers) + fork("pt_main_thread", two_workers)
    print("ready", os.getpid(), *children, flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
