"""A thread-safe least-recently-used cache bounded by the total weight of its values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Hashable


class LRUCache:
    """Keeps the most recently used values while their summed weight stays within ``capacity``.

    Weights are whatever the caller measures (1 per entry for a count bound, bytes for a memory
    bound). A value heavier than the whole capacity is not kept.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.weight = 0
        self._data: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        """Return the cached value for ``key`` (marking it recently used), or None."""
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            self._data.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: object, weight: int = 1) -> None:
        """Insert or replace ``key``, then evict least recently used entries down to capacity."""
        if weight > self.capacity:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._data[key] = (value, weight)
            self.weight += weight
            while self.weight > self.capacity:
                _, (_, evicted) = self._data.popitem(last=False)
                self.weight -= evicted

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self.weight = 0
