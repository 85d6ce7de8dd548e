"""What every pod source is: something that lists this node's pods, or says why it cannot."""

from __future__ import annotations

from typing import Protocol

from gputop.collect.pods.names import PodListing


class PodSourceError(Exception):
    """A source that could not answer, with the reason in a few words (shown as the pod's N/A reason)."""

    @property
    def reason(self) -> str:
        return str(self.args[0])


class PodSource(Protocol):
    """A place the pods of this node are listed."""

    @property
    def name(self) -> str: ...

    def listing(self) -> PodListing:
        """This node's pods; ``PodSourceError`` with the reason where there are none to tell. Never anything else:
        it runs on the resolver's thread."""
        ...
