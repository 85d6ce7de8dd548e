"""The advisor: rules over a window of snapshots that name the change a training job needs, and the value.

``Advisor(pid).update(snapshot)`` returns the findings (``gputop.model.Advice``) active after each snapshot. It
reads snapshots only, and takes its time from them, so it works the same live, in ``gputop report``, at the end
of ``gputop run`` and over a replayed recording. The rules are described in docs/advisor.md.
"""

from __future__ import annotations

from gputop.advisor.engine import Advisor
from gputop.advisor.rules import RULE_IDS
from gputop.advisor.window import AdvisorConfig

__all__ = ["RULE_IDS", "Advisor", "AdvisorConfig"]
