"""Items handed from other threads (a sampler, the hosts' connections) to the UI thread, one wake-up per batch."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Inbox(Generic[T]):
    """``put`` from any thread queues an item and calls ``wake`` (which posts a message to the app) unless a wake-up
    is already pending; the UI thread then takes the whole batch with ``drain``. A burst, or a slow terminal, costs
    one redraw.

    Without ``key`` no item is lost. With ``key``, at most one item per key waits: an item put while another of
    its key waits takes that one's place, as ``merge(waiting, new)`` (the new item itself without ``merge``), so
    whatever a producer sends, and however long the UI thread is busy, what waits is bounded by the keys.
    """

    def __init__(
        self,
        wake: Callable[[], object],
        key: Callable[[T], Hashable] | None = None,
        merge: Callable[[T, T], T] | None = None,
    ) -> None:
        self._wake = wake
        self._key: Callable[[T], Hashable] = key if key is not None else _distinct()
        self._merge = merge
        self._items: dict[Hashable, T] = {}
        self._lock = threading.Lock()
        self._pending = False

    def put(self, item: T) -> None:
        key = self._key(item)
        with self._lock:
            waiting = self._items.pop(key, None)  # popped, so the batch stays in the order of the latest puts
            if waiting is not None and self._merge is not None:
                item = self._merge(waiting, item)
            self._items[key] = item
            if self._pending:
                return
            self._pending = True
        self._wake()

    def drain(self) -> Iterator[T]:
        """The items queued so far, oldest first. Anything put from now on wakes the UI thread again."""
        with self._lock:
            self._pending = False
            items, self._items = self._items, {}
        yield from items.values()


def _distinct() -> Callable[[object], Hashable]:
    """A key that differs for every item: nothing is merged, every item is kept, in order."""
    counter = itertools.count()
    return lambda _: next(counter)
