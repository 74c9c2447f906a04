"""Chunk bytes embedded in an archive, in pieces (family ``D``, record version 2; docs/archive-format.rst).

A native chunk file is stored as pieces keyed ``(chunk id, offset of the piece's first byte)``, cut
at every offset a reader asks for on its own (a shard's index and each inner chunk) and so that no
piece exceeds PIECE_SIZE. Pieces share a data block up to BLOCK_BYTES; a larger piece has a block of
its own. Each such block's index key is its first record's key exactly, so a lookup of any byte lands
on the block holding it, and a byte range costs the blocks holding it and nothing else.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from zsarchive.archive.format import tuples
from zsarchive.archive.format import schema
from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128
from zsarchive.zs.reader import ZS

PIECE_SIZE = 1 << 20
"""Most bytes one piece holds."""
BLOCK_BYTES = 1 << 16
"""Pieces share a data block while together they hold at most this many bytes."""
_VERSION = 2
_HEAD_MAX = 64  # a piece record's key and value header fit in this many bytes (chunk ids are 20 characters)


class PieceBlock(list[bytes]):
    """The records of one data block of chunk pieces, written stored (or compressed, ``stored``
    False) with ``key_length`` bytes of its first record as its index key."""

    def __init__(self, records: list[bytes], key_length: int, stored: bool) -> None:
        super().__init__(records)
        self.key_length = key_length
        self.stored = stored


def piece_starts(size: int, cuts: Iterable[int] = ()) -> list[int]:
    """Offsets where the pieces of a ``size``-byte chunk file start: 0, each of ``cuts`` inside the
    file, and as many more as keep every piece within PIECE_SIZE."""
    marks = sorted({0, *(c for c in cuts if 0 < c < size)})
    starts: list[int] = []
    for start, stop in zip(marks, marks[1:] + [size]):
        starts.extend(range(start, max(stop, start + 1), PIECE_SIZE))
    return starts


def _head(chunk_id: str, start: int) -> bytes:
    """A piece record up to the end of its key (the END byte)."""
    return schema.key_prefix(schema.CHUNK_DATA, (chunk_id, start)) + b"\x00"


def piece_records(chunk_id: str, data: bytes, starts: list[int]) -> list[tuple[bytes, int, int]]:
    """``(record, key length, piece length)`` of each piece of one chunk file (``starts``: :func:`piece_starts`)."""
    view = memoryview(data)
    out = []
    for start, stop in zip(starts, starts[1:] + [len(view)]):
        head = _head(chunk_id, start)
        piece = view[start:stop]
        out.append((b"".join((head, bytes((_VERSION, tuples.BLOB)), uleb128.encode(len(piece)), piece)),
                    len(head), len(piece)))
    return out


def piece_blocks(files: Iterable[list[tuple[bytes, int, int]]], stored: bool) -> Iterator[PieceBlock]:
    """The blocks of chunk files given in chunk id order, each as its :func:`piece_records`."""
    return _blocks((piece for records in files for piece in records), stored)


def regroup(records: Iterable[bytes], stored: bool, where: str) -> Iterator[PieceBlock]:
    """The blocks of piece records given in key order (copied from another archive), cut as
    :func:`piece_blocks` cuts them."""
    def pieces() -> Iterator[tuple[bytes, int, int]]:
        for rec in records:
            _, _, data = _split(rec, where)
            yield rec, tuples.key_end(rec), len(data)

    return _blocks(pieces(), stored)


def _blocks(pieces: Iterable[tuple[bytes, int, int]], stored: bool) -> Iterator[PieceBlock]:
    """``(record, key length, piece length)`` items cut into blocks: consecutive pieces share one while
    together they hold at most BLOCK_BYTES; a larger piece has its own."""
    records: list[bytes] = []
    size, key_length = 0, 0
    for record, head, length in pieces:
        if records and (size + length > BLOCK_BYTES):
            yield PieceBlock(records, key_length, stored)
            records, size = [], 0
        if not records:
            key_length = head
        records.append(record)
        size += length
    if records:
        yield PieceBlock(records, key_length, stored)


def _split(record: bytes | memoryview, where: str) -> tuple[str, int, memoryview | bytes]:
    """``(chunk id, start, bytes)`` of a piece record (bytes a view into ``record`` when it is one);
    a record version 1 holds the whole file at start 0."""
    head = bytes(record[:_HEAD_MAX])
    key, pos = tuples.decode(head, 1, what=f"{where}: chunk data record key")
    if pos >= len(head) or not key or not isinstance(key[0], str):
        raise ZSCorrupt(f"{where}: chunk data record {head[:40]!r} is malformed")
    version = head[pos]
    if version == 1 and len(key) == 1:
        return key[0], 0, schema.split(bytes(record))[2][0]
    if version != _VERSION or len(key) != 2 or not isinstance(key[1], int) or head[pos + 1:pos + 2] != bytes((tuples.BLOB,)):
        raise ZSCorrupt(f"{where}: chunk data record {head[:40]!r} is malformed")
    length, at = uleb128.decode(head, pos + 2, f"{where}: chunk data record length")
    if at + length != len(record):
        raise ZSCorrupt(f"{where}: chunk data record {head[:40]!r} holds {len(record) - at} bytes, "
                        f"its length says {length}")
    return key[0], key[1], record[at:]


def read_pieces(zs: ZS, chunk_id: str, start: int, stop: int, views: bool = False) -> bytes | memoryview | None:
    """Bytes ``[start, stop)`` of an embedded chunk file, or None if the archive does not embed it.
    ``views``: a memoryview into the archive's map where one piece holds the range (no copy)."""
    where = f"{zs.name}: embedded chunk {chunk_id}"
    before = schema.key_prefix(schema.CHUNK_DATA, (chunk_id, start)) + b"\x01"
    end = schema.key_prefix(schema.CHUNK_DATA, (chunk_id, max(stop, start + 1))) + b"\x00"
    pieces = [p for p in (_split(r, where) for r in zs.floor_span(before, end, views)) if p[0] == chunk_id]
    if not pieces:
        return None
    at = pieces[0][1]
    if at > start:
        raise ZSCorrupt(f"{where}: no piece holds byte {start} (the first piece found starts at {at})")
    for _, piece_start, data in pieces:
        if piece_start != at:
            raise ZSCorrupt(f"{where}: pieces leave a gap: bytes from {at} to {piece_start} are missing")
        at += len(data)
    if at < stop:
        raise ZSCorrupt(f"{where}: no piece holds bytes {at} to {stop} (a damaged archive, or a ref past "
                        "the end of the file)")
    first = pieces[0][1]
    if len(pieces) == 1:
        return pieces[0][2][start - first:stop - first]
    return b"".join(data for _, _, data in pieces)[start - first:stop - first]


def file_size(zs: ZS, chunk_id: str) -> int | None:
    """Where an embedded chunk file ends (its last piece's start and length), or None if the archive does not
    embed it: one lookup, which reads the block of the last piece alone."""
    head = schema.key_prefix(schema.CHUNK_DATA, (chunk_id,))
    # every key of this file continues ``head`` with END (a whole file) or an integer below 2**64 (a piece's
    # start, type code at most 1C): the last record before ``head`` + 1E is the file's last
    last = [r for r in zs.floor_span(head + b"\x1e", head + b"\x1f", True)
            if bytes(r[:len(head)]) == head and r[len(head)] != 0xFF]
    if not last:
        return None
    _, start, data = _split(memoryview(last[-1]), f"{zs.name}: embedded chunk {chunk_id}")
    return start + len(data)


STREAM_WINDOW = 4 << 20
"""Bytes of an embedded file :func:`stream_file` reads at a time (at least one piece)."""


def stream_file(zs: ZS, chunk_id: str, stop: int, views: bool = False, start: int = 0
                ) -> Iterator[bytes | memoryview]:
    """Bytes ``[start, stop)`` of an embedded chunk file as its pieces (the first and last cut to the range),
    read about :data:`STREAM_WINDOW` bytes at a time, so that memory does not follow a file's or a ref's
    length. ``views`` as for :func:`read_pieces`: a restore writes them out with no copy of its own.
    ZSCorrupt where pieces leave a gap, or end before ``stop``."""
    where = f"{zs.name}: embedded chunk {chunk_id}"
    at = start
    while at < stop:
        before = schema.key_prefix(schema.CHUNK_DATA, (chunk_id, at)) + b"\x01"
        end = schema.key_prefix(schema.CHUNK_DATA, (chunk_id, min(at + STREAM_WINDOW, stop))) + b"\x00"
        progress = at
        for piece_id, piece_start, data in (_split(memoryview(r), where) for r in zs.floor_span(before, end, views)):
            if piece_id != chunk_id or piece_start + len(data) <= at:
                continue  # another file's, or a piece already given
            if piece_start > at:
                raise ZSCorrupt(f"{where}: pieces leave a gap: bytes from {at} to {piece_start} are missing")
            data = data[at - piece_start:stop - piece_start]
            yield data
            at += len(data)
        if at == progress:
            raise ZSCorrupt(f"{where}: no piece holds byte {at} (the file ends before byte {stop})")
