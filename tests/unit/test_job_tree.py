"""The nearest training process above each training process, found for all of them in one walk."""

from __future__ import annotations

import random

from gputop.collect.job_tree import JobTree
from gputop.model import HostProcess


def tree_of(parents: dict[int, int]) -> JobTree:
    return JobTree({pid: HostProcess(pid, ppid=ppid, name="python") for pid, ppid in parents.items()}, set())


def test_training_parents_agree_with_the_walk_of_each_process_on_random_trees() -> None:
    rng = random.Random(15)
    for _ in range(200):
        size = rng.randint(1, 60)
        parents = {pid: rng.choice([1, *range(2, pid)]) if pid > 2 else 1 for pid in range(2, size + 2)}
        for pid in rng.sample(sorted(parents), k=min(3, len(parents))):  # parents not in the tree (exited)
            parents[pid] = 10_000 + pid
        tree = tree_of(parents)
        training = set(rng.sample(sorted(parents), k=rng.randint(0, len(parents))))

        found = tree.training_parents(training)

        expected = {pid: tree.training_parent(pid, training) for pid in training}
        assert found == {pid: parent for pid, parent in expected.items() if parent is not None}


def test_ranks_under_a_launcher_deep_below_init() -> None:
    # init <- sshd <- bash <- torchrun(10) <- ranks 11, 12; rank 12's helper 13 is training too.
    tree = tree_of({2: 1, 3: 2, 10: 3, 11: 10, 12: 10, 13: 12})

    assert tree.training_parents({10, 11, 12, 13}) == {11: 10, 12: 10, 13: 12}
    assert tree.training_parents({11, 13}) == {}  # 13 sits under rank 12, which is not a training process here
