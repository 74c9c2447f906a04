"""The writer's side of the index tree, built as data blocks are written.

Each level keeps at most ``branching_factor`` pending entries: an index block is written as soon
as a level fills up, so memory does not grow with the input, and at the end partial levels are
flushed bottom-up into one root index block, the last block of the file.
"""

from __future__ import annotations

from typing import Callable

from zsarchive.errors import ZSError
from zsarchive.zs.format.block import MAX_INDEX_LEVEL, IndexEntry, encode_block, encode_index


def shortest_separator(previous: bytes | bytearray, first: bytes | bytearray) -> bytes:
    """Shortest prefix of ``first`` that is >= ``previous`` (requires previous <= first).

    It is a valid index key for a block starting with ``first`` after a block ending with
    ``previous``: <= the block's first record and >= every record before it.
    """
    n = min(len(previous), len(first))
    # Binary search for the common prefix length: one slice comparison per step stays fast
    # even for megabyte records.
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if previous[:mid] == first[:mid]:
            lo = mid
        else:
            hi = mid - 1
    if lo == len(previous):
        return bytes(previous)  # previous is a prefix of first (or equal): it is the separator
    return bytes(first[: lo + 1])


class IndexBuilder:
    """Index entries of written blocks, level by level; ``append(framed)`` writes a block and
    returns its offset."""

    def __init__(
        self, branching_factor: int, compress: Callable[[bytes], bytes], append: Callable[[bytes], int]
    ) -> None:
        self.branching_factor = branching_factor
        self._compress = compress
        self._append = append
        self._levels: list[list[IndexEntry]] = []

    def add(self, level: int, key: bytes, offset: int, length: int) -> None:
        """Record a written block of ``level`` as a pending entry of its parent index."""
        if level == len(self._levels):
            self._levels.append([])
        entries = self._levels[level]
        entries.append(IndexEntry(key, offset, length))
        if len(entries) >= self.branching_factor:
            self._flush(level)

    def _flush(self, level: int) -> None:
        """Write an index block over the pending entries of ``level``."""
        entries = self._levels[level]
        self._levels[level] = []
        if level + 1 > MAX_INDEX_LEVEL:
            raise ZSError(f"index would need more than {MAX_INDEX_LEVEL} levels; raise branching_factor")
        framed = encode_block(level + 1, self._compress(encode_index(entries)))
        # The first child's key already satisfies the key invariant for the whole span.
        self.add(level + 1, entries[0].key, self._append(framed), len(framed))

    def finish(self) -> IndexEntry:
        """Flush partial levels bottom-up until one index block references everything: the root."""
        level = 0
        while True:
            entries = self._levels[level]
            if level > 0 and level == len(self._levels) - 1 and len(entries) == 1:
                return entries[0]
            if entries:
                self._flush(level)
            level += 1
