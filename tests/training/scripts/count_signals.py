"""Counts the SIGINTs and SIGTERMs it gets: after the first, it waits a second for more, prints the counts and
exits with 40 + how many arrived. A signal delivered twice shows as 42, not 41. Needs no torch."""

from __future__ import annotations

import os
import signal
import sys
import time

counts = {"INT": 0, "TERM": 0}


def count(signo: int, _frame: object) -> None:
    counts[signal.Signals(signo).name[3:]] += 1


signal.signal(signal.SIGINT, count)
signal.signal(signal.SIGTERM, count)
print("ready", os.getpid(), flush=True)
while not any(counts.values()):
    time.sleep(0.01)
time.sleep(1.0)
print(f"signals INT={counts['INT']} TERM={counts['TERM']}", flush=True)
sys.exit(40 + sum(counts.values()))
