"""The soak's churn in-process, as fast as the machine goes: the real dashboard under Textual's test pilot, fed
snapshots of the real collectors over the fake driver, each stamped 0.1 s after the last (so the history and the
advisor see a 0.1 s interval), with a quarter of 64 GPU processes replaced every 50 ticks and GPU 1 lost from 40 %
to 60 % of the run.

Every ``--every`` ticks it prints the RSS and the live Textual nodes by class: a widget class whose count keeps
growing is kept alive by something (that is how the footer's leak was found; ``benchmarks/soak.py`` measures the
real dashboard in tmux). ``--no-advisor`` leaves the advisor out, to run faster.

usage: python benchmarks/soak_pilot.py [--ticks 6000] [--every 500] [--no-advisor]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sleepers import Sleepers  # noqa: E402
from benchmarks.soak import GPUS, INTERVAL_S, write_machine  # noqa: E402
from gputop.advisor import Advisor  # noqa: E402
from gputop.collect.sampler import SnapshotMaker  # noqa: E402
from gputop.model import Advice, Snapshot  # noqa: E402
from gputop.ui.app import GputopApp  # noqa: E402
from gputop.ui.feed import LiveFeed  # noqa: E402
from tests.fakenvml.build import use_in_process  # noqa: E402

PROCESSES = 64
CHURN_TICKS = 50
SLOW_TICKS = 20


class PushedSource:
    """A snapshot source the loop below pushes into."""

    def __init__(self) -> None:
        self.subscribers: list[object] = []

    def subscribe(self, callback: object) -> None:
        self.subscribers.append(callback)

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def set_interval(self, interval_s: float) -> None: ...


class NoAdvisor:
    def update(self, snap: Snapshot) -> tuple[Advice, ...]:
        return ()


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


async def run(ticks: int, every: int, advisor: bool) -> None:
    from textual.dom import DOMNode

    group = Sleepers()
    with tempfile.TemporaryDirectory(prefix="gputop-soak-pilot-") as tmp:
        state = Path(tmp) / "nvml-state.txt"
        try:
            group.spawn(PROCESSES)
            write_machine(state, group.pids, lost=False)
            os.environ["FAKE_NVML_STATE"] = str(state)
            use_in_process("r550")
            maker = SnapshotMaker(slow_interval_s=float("inf"))
            maker.start()
            source = PushedSource()
            feed = LiveFeed(source, Advisor() if advisor else NoAdvisor())  # type: ignore[arg-type]
            app = GputopApp(feed, interval_s=INTERVAL_S)
            started, lost = time.time(), False
            async with app.run_test(headless=True, size=(160, 48)) as pilot:
                for tick in range(ticks):
                    churn = tick > 0 and tick % CHURN_TICKS == 0
                    if churn:
                        group.end(PROCESSES // 4)
                        group.spawn(PROCESSES // 4)
                    should_lose = 0.4 <= tick / ticks < 0.6
                    if churn or should_lose != lost:
                        lost = should_lose
                        write_machine(state, group.pids, lost)
                    snap = maker.snapshot(force_slow=tick % SLOW_TICKS == 0)
                    snap = dataclasses.replace(snap, time=started + tick * INTERVAL_S)
                    for push in source.subscribers:
                        push(snap)  # type: ignore[operator]
                    await pilot._wait_for_screen()
                    await asyncio.sleep(0.005)  # let the screen draw
                    if tick % every == 0 or tick == ticks - 1:
                        gc.collect()
                        nodes = Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, DOMNode))
                        print(
                            f"tick {tick:>6}  RSS {rss_mib():6.1f} MiB  Textual nodes {sum(nodes.values())}: "
                            + ", ".join(f"{name} {count}" for name, count in nodes.most_common(4)),
                            flush=True,
                        )
            maker.close()
        finally:
            group.close()
    print(f"{GPUS} GPUs, {PROCESSES} processes, a quarter replaced every {CHURN_TICKS} ticks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=6000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--no-advisor", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.ticks, args.every, advisor=not args.no_advisor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
