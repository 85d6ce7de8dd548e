"""``stop_signals``: the first SIGTERM or Ctrl-C only asks a command to stop, a second one stops it at once, and
the handlers from before come back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

from gputop.cli.console import Terminated, stop_signals

pytestmark = pytest.mark.fast  # pure: signals to this process only, no subprocess


@pytest.mark.parametrize(("signum", "second"), [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_the_first_signal_asks_and_the_second_raises(signum, second):
    with stop_signals() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signum)  # delivered to the main thread before os.kill returns
        assert stop.requested
        with pytest.raises(second):
            os.kill(os.getpid(), signum)


def test_either_signal_counts_towards_the_second():
    with stop_signals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
    assert stop.requested


def test_the_handlers_from_before_are_restored():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with stop_signals():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before
