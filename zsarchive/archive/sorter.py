"""External sort of byte strings: sorted runs spilled to temporary files, merged with heapq.

Memory stays bounded by ``max_bytes`` however many records are added, which is what lets an
export of hundreds of millions of records run on a small machine.
"""

from __future__ import annotations

import heapq
import struct
import tempfile
from typing import BinaryIO, Iterator

_LEN = struct.Struct("<I")


class ExternalSorter:
    """Collects byte strings, then yields them in bytewise order (duplicates dropped when ``unique``)."""

    def __init__(self, max_bytes: int = 128 << 20, tmpdir: str | None = None, unique: bool = True):
        self._max_bytes = max_bytes
        self._tmpdir = tmpdir
        self._unique = unique
        self._items: list[bytes] = []
        self._size = 0
        self._runs: list[BinaryIO] = []
        self.count = 0
        """Items added (before duplicates are dropped)."""

    def add(self, item: bytes) -> None:
        """Add one item; spills a sorted run to disk when the buffer is full."""
        self._items.append(item)
        self._size += len(item) + 64  # 64: rough per-object overhead of a small bytes in a list
        self.count += 1
        if self._size >= self._max_bytes:
            self._spill()

    def extend(self, items: list[bytes]) -> None:
        """Add many items at once (cheaper per item than :meth:`add`)."""
        self._items.extend(items)
        self._size += sum(map(len, items)) + 64 * len(items)
        self.count += len(items)
        if self._size >= self._max_bytes:
            self._spill()

    def _spill(self) -> None:
        self._items.sort()
        run = tempfile.TemporaryFile(dir=self._tmpdir, prefix="zsarchive-sort-", buffering=1 << 20)
        pack = _LEN.pack
        run.write(b"".join(pack(len(item)) + item for item in self._items))
        run.seek(0)
        self._runs.append(run)
        self._items = []
        self._size = 0

    @staticmethod
    def _read_run(run: BinaryIO) -> Iterator[bytes]:
        reader = run.read
        unpack = _LEN.unpack
        while True:
            head = reader(4)
            if not head:
                run.close()
                return
            yield reader(unpack(head)[0])

    def sorted(self) -> Iterator[bytes]:
        """Every item added, in bytewise order; consumes the sorter."""
        self._items.sort()
        if self._runs:
            merged = heapq.merge(iter(self._items), *(self._read_run(run) for run in self._runs))
        else:
            merged = iter(self._items)
        if not self._unique:
            return merged
        return self._dedup(merged)

    @staticmethod
    def _dedup(merged: Iterator[bytes]) -> Iterator[bytes]:
        previous = None
        for item in merged:
            if item != previous:
                yield item
                previous = item

    def close(self) -> None:
        """Drop the spilled runs (also done as each run is read to its end)."""
        for run in self._runs:
            run.close()
        self._runs = []
        self._items = []

