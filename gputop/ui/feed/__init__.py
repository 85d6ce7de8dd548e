"""What the dashboard shows, and how it hears of something new: a ``Feed``.

``interface`` holds the feed's protocols (``Feed``, ``FeedClient``) and ``Ended``; ``live`` the live dashboard's
feed (``LiveFeed``), ``source`` what it reads snapshots from (``SnapshotSource``: a sampler) and ``inbox`` the
hand-off from other threads to the UI thread (``Inbox``), which the multi-host view uses too. The other feeds are
the replay's (gputop/ui/replay/player.py) and a remote host's (gputop/ui/hosts/feed.py). Nothing here imports
Textual.
"""

from gputop.ui.feed.interface import Ended, Feed, FeedClient
from gputop.ui.feed.live import LiveFeed

__all__ = ["Ended", "Feed", "FeedClient", "LiveFeed"]
