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
MAX_RUNS = 64
"""Spilled runs merged at once at most (bounds open files and read buffers)."""


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
        self._runs.append(self._write_run(self._items))
        self._items = []
        self._size = 0
        if len(self._runs) >= MAX_RUNS:
            # Merge the runs into one now: a later merge then never needs more open files or
            # read buffers than MAX_RUNS, however large the input.
            merged = heapq.merge(*self._readers())
            self._runs = [self._write_run(merged)]

    def _write_run(self, items) -> BinaryIO:
        run = tempfile.TemporaryFile(dir=self._tmpdir, prefix="zsarchive-sort-")
        pack = _LEN.pack
        batch: list[bytes] = []
        for item in items:
            batch.append(pack(len(item)))
            batch.append(item)
            if len(batch) >= 32768:
                run.write(b"".join(batch))
                batch = []
        run.write(b"".join(batch))
        run.flush()
        return run

    def _readers(self) -> list[Iterator[bytes]]:
        # Read buffers share the memory budget: many runs, smaller buffers.
        size = max(1 << 16, min(1 << 20, self._max_bytes // (2 * max(1, len(self._runs)))))
        readers = []
        for run in self._runs:
            run.seek(0)
            readers.append(self._read_run(run, open(run.fileno(), "rb", buffering=size, closefd=False)))
        return readers

    @staticmethod
    def _read_run(run: BinaryIO, buffered: BinaryIO) -> Iterator[bytes]:
        reader = buffered.read
        unpack = _LEN.unpack
        while True:
            head = reader(4)
            if not head:
                buffered.close()
                run.close()
                return
            yield reader(unpack(head)[0])

    def sorted(self) -> Iterator[bytes]:
        """Every item added, in bytewise order; consumes the sorter."""
        self._items.sort()
        merged: Iterator[bytes]
        if self._runs:
            merged = heapq.merge(iter(self._items), *self._readers())
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
