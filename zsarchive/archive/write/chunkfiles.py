"""Chunk file entries: how an export names, in one sorted stream, every chunk file its chunk refs point
to, native files first, then virtual shards. A native file's entry is ``b"<chunk id> <offset>
<length>"``, a virtual shard's is ``b"~"`` and its ``I`` record key, encoded (``~`` sorts after every
base32 chunk id); either ends in ``b" " + layout`` (:meth:`ShardLayout.encode`) where its array is
sharded. These entries live only in an export's temporary sort files: the archive never holds them."""

from __future__ import annotations

from typing import NamedTuple

from zsarchive.archive.format import tuples
from zsarchive.archive.format.shards import ShardLayout

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
    """A virtual shard a chunk ref names: its ``I`` record key and its array's shard layout."""

    key: tuple
    layout: ShardLayout

    @classmethod
    def parse(cls, entry: bytes) -> VirtualShardEntry:
        body, _, layout = entry[len(MARK):].rpartition(b" ")  # a layout's text holds no space
        return cls(tuples.decode(body)[0], ShardLayout.decode(layout.decode("ascii")))

    def encode(self) -> bytes:
        return with_layout(MARK + tuples.encode(self.key), self.layout.encode())
