"""A fingerprint of what the advisor says: every finding after every snapshot, over the recordings in
``tests/data`` and the dashboard tests' scenes played for five minutes, hashed per source.

A change to the advisor's or the store's insides that must not change what users are told (a refactor, a faster
statistic) keeps every hash; run this before and after and compare. A change meant to alter findings changes the
hashes of the sources it is about, and only those.

usage: python benchmarks/findings_hash.py [--show]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputop.advisor import Advisor  # noqa: E402
from gputop.model import Advice, Snapshot  # noqa: E402
from gputop.store import open_recording  # noqa: E402
from tests.ui import scenes, training_scenes  # noqa: E402

SCENE_TICKS = 300
"""Five minutes of one-second ticks: long enough for every hold (the longest, memory-leak's, is five minutes)."""

SCENES: dict[str, Callable[[float], Snapshot]] = {
    "scene:starved_job": training_scenes.starved_job,
    "scene:fed_job": training_scenes.fed_job,
    "scene:two_jobs": training_scenes.two_jobs,
    "scene:training_node": scenes.training_node,
    "scene:real_work_node": scenes.real_work_node,
}


def recordings() -> Iterator[Path]:
    yield from sorted((ROOT / "tests" / "data").rglob("*.gputop"))


def played(make: Callable[[float], Snapshot]) -> Iterator[Snapshot]:
    for tick in range(SCENE_TICKS):
        yield make(scenes.T0 + tick)


def read(path: Path) -> list[Snapshot]:
    with open_recording(path) as recording:
        return list(recording)


def plain(advice: Advice) -> object:
    return dataclasses.asdict(advice)


def fingerprint(snapshots: Iterable[Snapshot]) -> tuple[str, int, int]:
    """The hash of the findings after each snapshot, the snapshots and the findings seen."""
    advisor = Advisor()
    digest = hashlib.sha256()
    count = findings = 0
    for snap in snapshots:
        advice = advisor.update(snap)
        digest.update(json.dumps([plain(a) for a in advice], sort_keys=True, default=repr).encode())
        digest.update(b"\n")
        count += 1
        findings += len(advice)
    return digest.hexdigest()[:16], count, findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="also print the rule ids found per source")
    args = parser.parse_args()
    total = hashlib.sha256()
    sources: list[tuple[str, Callable[[], Iterable[Snapshot]]]] = [
        (str(path.relative_to(ROOT)), lambda path=path: read(path)) for path in recordings()
    ]
    sources += [(name, lambda make=make: played(make)) for name, make in SCENES.items()]
    for name, snapshots in sources:
        digest, count, findings = fingerprint(snapshots())
        total.update(f"{name} {digest}\n".encode())
        print(f"{digest}  {count:5d} snapshots  {findings:6d} findings  {name}")
        if args.show:
            advisor = Advisor()
            ids = sorted({a.id for snap in snapshots() for a in advisor.update(snap)})
            print(f"{'':18}{', '.join(ids) or '(none)'}")
    print(f"{total.hexdigest()[:16]}  all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
