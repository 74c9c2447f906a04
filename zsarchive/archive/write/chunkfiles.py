"""Chunk file entries: how an export names, in one sorted stream, every chunk file its chunk refs point
to, native files first, then virtual shards. A native file's entry is ``b"<chunk id> <offset>
<length>"``, a virtual shard's is ``b"~"`` and its ``I`` record key, encoded (``~`` sorts after every
base32 chunk id); either ends in ``b" " + layout`` (:meth:`ShardLayout.encode`) where its array is
sharded. A virtual range's entry (every virtual ref's, when an export keeps their bytes) has the same form, without
a layout where its array is not sharded. These entries live only in an export's temporary sort files:
the archive never holds them."""

from __future__ import annotations

from typing import NamedTuple

from zsarchive.archive.format import tuples
from zsarchive.archive.format.shards import ShardLayout
from zsarchive.archive.format.views import VirtualRangeKey

MARK = b"~"
"""First byte of a virtual shard's entry."""
NATIVE = b"%s %d %d"
"""A native file's entry, %-formatted with its chunk id (ASCII bytes), offset and length (an export
formats millions of these a batch at a time, hence a format and not a function)."""


def with_layout(entry: bytes, layout: str | None) -> bytes:
    """``entry`` followed by the shard layout of its array, if sharded."""
    return entry if layout is None else entry + b" " + layout.encode("ascii")


def is_virtual(entry: bytes) -> bool:
    """Whether an entry names a virtual shard (the entries after the native files)."""
    return entry.startswith(MARK)


class NativeFileEntry(NamedTuple):
    """A native chunk file a chunk ref names: its id, the ref's range, its array's shard layout text."""

    chunk_id: str
    offset: int
    length: int
    layout: str | None

    @classmethod
    def parse(cls, entry: bytes) -> NativeFileEntry:
        chunk_id, offset, length, *layout = entry.decode("ascii").split(" ", 3)
        return cls(chunk_id, int(offset), int(length), layout[0] if layout else None)

    def encode(self) -> bytes:
        return with_layout(NATIVE % (self.chunk_id.encode("ascii"), self.offset, self.length), self.layout)


class VirtualShardEntry(NamedTuple):
    """A virtual range a chunk ref names: its ``I`` (and ``E``) record key, and its array's shard layout
    where the array is sharded (a virtual shard)."""

    key: VirtualRangeKey
    layout: ShardLayout | None

    @classmethod
    def parse(cls, entry: bytes) -> VirtualShardEntry:
        end = len(MARK)
        for _ in range(5):  # location, offset, length, etag, last_modified
            end = tuples.element_end(entry, end)
        layout = entry[end + 1 :]  # after the space that follows the key
        return cls(
            VirtualRangeKey.decode(tuples.decode(entry[len(MARK) : end])[0]),
            ShardLayout.decode(layout.decode("ascii")) if layout else None,
        )

    def encode(self) -> bytes:
        return with_layout(MARK + tuples.encode(self.key), None if self.layout is None else self.layout.encode())
