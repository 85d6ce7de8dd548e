"""``gputop.startup``: the collector held while the command starts, then what it made frozen and collection
resumed; untouched for Python code that never held it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gputop import startup

pytestmark = pytest.mark.fast  # pure: this process's collector only, put back as it was


@pytest.fixture(autouse=True)
def collector_put_back() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    startup._held = False
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_held_then_resumed_with_what_was_made_frozen():
    gc.enable()
    startup.hold()
    assert not gc.isenabled()
    made = [[] for _ in range(1000)]  # containers the collector tracks

    startup.resume()

    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)
    frozen = gc.get_freeze_count()
    startup.resume()  # once only
    assert gc.get_freeze_count() == frozen


def test_resume_without_hold_changes_nothing():
    gc.enable()
    startup.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_someone_else_disabled_stays_disabled():
    gc.disable()
    startup.hold()
    startup.resume()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_command_resumes_it_before_it_runs(tmp_path, capsys):
    from gputop.cli import main

    gc.enable()
    startup.hold()
    assert main(["replay", str(tmp_path / "missing.gputop")]) == 2  # it ran, and said why it could not
    assert gc.isenabled()
    assert "no such file" in capsys.readouterr().err
