"""Items handed from other threads (a sampler, the hosts' connections) to the UI thread, one wake-up per batch."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Inbox(Generic[T]):
    """``put`` from any thread queues an item and calls ``wake`` (which posts a message to the app) unless a wake-up
    is already pending; the UI thread then takes the whole batch with ``drain``. A burst, or a slow terminal, costs
    one redraw, while no item is lost."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._items: deque[T] = deque()
        self._lock = threading.Lock()
        self._pending = False

    def put(self, item: T) -> None:
        self._items.append(item)
        with self._lock:
            if self._pending:
                return
            self._pending = True
        self._wake()

    def drain(self) -> Iterator[T]:
        """The items queued so far, oldest first. Anything put from now on wakes the UI thread again."""
        with self._lock:
            self._pending = False
        while self._items:
            yield self._items.popleft()
