"""Chunk bytes embedded in an archive, in pieces (family ``D``, record version 2, and family ``E``, format 7;
docs/archive-format.rst).

A native chunk file is stored as pieces keyed ``(chunk id, offset of the piece's first byte)``, the
range of a virtual chunk ref as pieces keyed ``(location, offset, length, checksum_etag,
checksum_last_modified, offset of the piece's first byte)`` (or as an alias naming another checksum
of the same range whose pieces hold the same bytes); both are cut at every offset a reader asks for on
its own (a shard's index and each inner chunk) and so that no piece exceeds PIECE_SIZE. Pieces share a data block up to BLOCK_BYTES; a larger piece has a block of
its own. Each such block's index key is its first record's key exactly, so a lookup of any byte lands
on the block holding it, and a byte range costs the blocks holding it and nothing else.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from zsarchive.archive.format import tuples
from zsarchive.archive.format import schema
from zsarchive.archive.format.views import VirtualAliasValue, VirtualRangeKey
from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.zs.format import uleb128
from zsarchive.zs.reader import ZS

PIECE_SIZE = 1 << 20
"""Most bytes one piece holds."""
BLOCK_BYTES = 1 << 16
"""Pieces share a data block while together they hold at most this many bytes."""
_HEAD_MAX = 64  # a D piece's key and value header fit in this many bytes (chunk ids are 20 characters)


class PieceBlock(list[bytes | bytearray]):
    """The records of one data block of chunk pieces, written stored (or compressed, ``stored``
    False) with ``key_length`` bytes of its first record as its index key."""

    def __init__(self, records: list[bytes | bytearray], key_length: int, stored: bool) -> None:
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


def _head(family: bytes, owner: tuple[Any, ...], start: int) -> bytes:
    """A piece record up to the end of its key (the END byte)."""
    return schema.key_prefix(family, (*owner, start)) + b"\x00"


def piece_records(chunk_id: str, data: bytes, starts: list[int]) -> list[tuple[bytes, int, int]]:
    """``(record, key length, piece length)`` of each piece of one chunk file (``starts``: :func:`piece_starts`)."""
    return owned_pieces(schema.CHUNK_DATA, (chunk_id,), data, starts)


def owned_pieces(
    family: bytes, owner: tuple[Any, ...], data: bytes | memoryview, starts: list[int], origin: int = 0
) -> list[tuple[bytes, int, int]]:
    """``(record, key length, piece length)`` of each piece of ``data``, the bytes from ``origin`` of
    what ``owner`` names (a chunk file's id, ``D``; a virtual range's key, ``E``), cut at ``starts``
    (offsets from ``origin`` on, the first ``origin``)."""
    view = memoryview(data)
    out = []
    for start, stop in zip(starts, starts[1:] + [origin + len(view)]):
        head, prefix = _prefix(family, owner, start, stop - start)
        piece = view[start - origin : stop - origin]
        out.append((b"".join((prefix, piece)), len(head), len(piece)))
    return out


def empty_pieces(
    family: bytes, owner: tuple[Any, ...], starts: list[int], stop: int
) -> tuple[list[tuple[bytes | bytearray, int, int]], list[memoryview]]:
    """:func:`owned_pieces` of bytes ``[starts[0], stop)`` not read yet: the records, their pieces' bytes
    not yet set, and a view of each piece's place, where a read puts its bytes (no copy into the records).
    A record whose piece the read does not fill whole must never be written."""
    from zsarchive.heap import unfilled_bytearray  # here: only an export reading local files fills pieces

    out: list[tuple[bytes | bytearray, int, int]] = []
    views = []
    for start, end in zip(starts, starts[1:] + [stop]):
        head, prefix = _prefix(family, owner, start, end - start)
        record = unfilled_bytearray(len(prefix) + end - start)
        record[: len(prefix)] = prefix
        out.append((record, len(head), end - start))
        views.append(memoryview(record)[len(prefix) :])
    return out, views


def _prefix(family: bytes, owner: tuple[Any, ...], start: int, length: int) -> tuple[bytes, bytes]:
    """A piece record's key, and its bytes up to the piece's (key, version and the blob's length)."""
    head = _head(family, owner, start)
    return head, b"".join((head, bytes((schema.RECORD_VERSIONS[family], tuples.BLOB)), uleb128.encode(length)))


def piece_blocks(files: Iterable[list[tuple[bytes, int, int]]], stored: bool) -> Iterator[PieceBlock]:
    """The blocks of chunk files given in chunk id order, each as its :func:`piece_records`."""
    return blocks_of((piece for records in files for piece in records), stored)


def regroup(records: Iterable[bytes], stored: bool, where: str) -> Iterator[PieceBlock]:
    """The blocks of piece records (and ``E`` aliases) given in key order (copied from another archive),
    cut as :func:`piece_blocks` cuts them."""

    def pieces() -> Iterator[tuple[bytes, int, int]]:
        for rec in records:
            key, data = _split(rec, where)
            yield rec, tuples.key_end(rec), len(data) if isinstance(data, (bytes, memoryview)) else 0

    return blocks_of(pieces(), stored)


def blocks_of(pieces: Iterable[tuple[bytes | bytearray, int, int]], stored: bool) -> Iterator[PieceBlock]:
    """``(record, key length, piece length)`` items (pieces in key order) cut into blocks: consecutive
    pieces share one while together they hold at most BLOCK_BYTES; a larger piece has its own."""
    records: list[bytes | bytearray] = []
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


def _head_of(record: bytes | memoryview) -> bytes:
    """The first bytes of a record as bytes: its key, its version and a blob's length header (a piece's
    bytes are not copied)."""
    size = _HEAD_MAX
    while True:
        head = bytes(record[:size])
        try:
            if tuples.key_end(head) + 12 <= len(head):
                return head
        except ZSCorrupt:
            if len(head) == len(record):
                raise
        if len(head) == len(record):
            return head
        size *= 4


def _split(record: bytes | memoryview, where: str) -> tuple[tuple[Any, ...], Any]:
    """``(key, bytes)`` of a piece record (bytes a view into ``record`` when it is one): a ``D`` record
    version 1 holds the whole file, key ``(chunk id, 0)``; an ``E`` alias gives ``(key, value)``."""
    head = _head_of(record)
    family = head[:1]
    name = schema.FAMILY_NAMES.get(family, "piece")
    key, pos = tuples.decode(head, 1, what=f"{where}: {name} record key")
    size = schema.OWNER_ELEMENTS.get(family, 0) + 1
    if pos >= len(head) or len(key) not in (size, size - 1) or not isinstance(key[0], str):
        raise ZSCorrupt(f"{where}: {name} record {head[:40]!r} is malformed")
    version = head[pos]
    if len(key) == size - 1:
        if family == schema.CHUNK_DATA and version == 1:
            return (key[0], 0), schema.split(bytes(record))[2][0]
        if family == schema.VIRTUAL_DATA and version == 1:
            return key, schema.split(bytes(record))[2]
        raise ZSCorrupt(f"{where}: {name} record {head[:40]!r} is malformed")
    if (
        version != schema.RECORD_VERSIONS[family]
        or not isinstance(key[-1], int)
        or head[pos + 1 : pos + 2] != bytes((tuples.BLOB,))
    ):
        raise ZSCorrupt(f"{where}: {name} record {head[:40]!r} is malformed")
    length, at = uleb128.decode(head, pos + 2, f"{where}: {name} record length")
    if at + length != len(record):
        raise ZSCorrupt(
            f"{where}: {name} record {head[:40]!r} holds {len(record) - at} bytes, its length says {length}"
        )
    return key, record[at:]


def _owned(
    zs: Any, family: bytes, owner: tuple[Any, ...], start: int, stop: int, zero_copy: bool, where: str
) -> tuple[list[tuple[int, Any]], list[tuple[tuple[Any, ...], Any]]]:
    """The pieces of ``owner`` holding bytes ``[start, stop)`` as ``(start, bytes)``, and every record the
    lookup found as ``(key, bytes or value)`` (an ``E`` alias among them)."""
    before = schema.key_prefix(family, (*owner, start)) + b"\x01"
    end = schema.key_prefix(family, (*owner, max(stop, start + 1))) + b"\x00"
    # the record before the lookup may be of the family before (the first piece of the family is later)
    found = [_split(r, where) for r in zs.floor_span(before, end, zero_copy) if bytes(r[:1]) == family]
    n = len(owner)
    return [(key[n], data) for key, data in found if len(key) == n + 1 and key[:n] == owner], found


def _joined(pieces: list[tuple[int, Any]], start: int, stop: int, where: str) -> bytes | memoryview:
    """Bytes ``[start, stop)`` of ``pieces`` (``(start, bytes)``, in order), which must hold them without gap."""
    at = pieces[0][0]
    if at > start:
        raise ZSCorrupt(f"{where}: no piece holds byte {start} (the first piece found starts at {at})")
    for piece_start, data in pieces:
        if piece_start != at:
            raise ZSCorrupt(f"{where}: pieces leave a gap: bytes from {at} to {piece_start} are missing")
        at += len(data)
    if at < stop:
        raise ZSCorrupt(
            f"{where}: no piece holds bytes {at} to {stop} (a damaged archive, or a ref past the end of the file)"
        )
    first = pieces[0][0]
    if len(pieces) == 1:
        one: bytes | memoryview = pieces[0][1]
        return one[start - first : stop - first]
    return b"".join(data for _, data in pieces)[start - first : stop - first]


def read_pieces(zs: ZS, chunk_id: str, start: int, stop: int, zero_copy: bool = False) -> bytes | memoryview | None:
    """Bytes ``[start, stop)`` of an embedded chunk file, or None if the archive does not embed it.
    ``zero_copy``: a memoryview into the archive's map where one piece holds the range (no copy)."""
    where = f"{zs.name}: embedded chunk {chunk_id}"
    pieces, _ = _owned(zs, schema.CHUNK_DATA, (chunk_id,), start, stop, zero_copy, where)
    return _joined(pieces, start, stop, where) if pieces else None


def read_virtual(
    zs: Any, key: tuple[Any, ...], start: int, stop: int, zero_copy: bool = False
) -> bytes | memoryview | None:
    """Bytes ``[start, stop)`` of the object a virtual range's key (``(location, offset, length,
    checksum_etag, checksum_last_modified)``) names, from the archive's ``E`` records (following an
    alias to the pin whose pieces hold them), or None if the archive does not keep that range."""
    where = f"{zs.name}: embedded virtual range {key[0]} [{key[1]}, {key[1] + key[2]})"
    if not key[1] <= start <= stop <= key[1] + key[2]:
        raise ZSError(f"{where}: bytes [{start}, {stop}) lie outside the range")
    pieces, found = _owned(zs, schema.VIRTUAL_DATA, key, start, stop, zero_copy, where)
    if not pieces:
        alias = next((value for k, value in found if k == key), None)
        if alias is None:
            return None
        target = VirtualRangeKey(*key[:3], *VirtualAliasValue.decode(alias, where)).encode()
        if target == key:
            raise ZSCorrupt(f"{where}: its alias names itself")
        pieces, _ = _owned(zs, schema.VIRTUAL_DATA, target, start, stop, zero_copy, where)
        if not pieces:
            raise ZSCorrupt(f"{where}: its alias names checksum {target[3:]}, whose range the archive does not hold")
    return _joined(pieces, start, stop, where)


def file_size(zs: ZS, chunk_id: str) -> int | None:
    """Where an embedded chunk file ends (its last piece's start and length), or None if the archive does not
    embed it: one lookup, which reads the block of the last piece alone."""
    head = schema.key_prefix(schema.CHUNK_DATA, (chunk_id,))
    # every key of this file continues ``head`` with END (a whole file) or an integer below 2**64 (a piece's
    # start, type code at most 1C): the last record before ``head`` + 1E is the file's last
    last = [
        r
        for r in zs.floor_span(head + b"\x1e", head + b"\x1f", True)
        if bytes(r[: len(head)]) == head and r[len(head)] != 0xFF
    ]
    if not last:
        return None
    key, data = _split(memoryview(last[-1]), f"{zs.name}: embedded chunk {chunk_id}")
    return int(key[1]) + len(data)


STREAM_WINDOW = 4 << 20
"""Bytes of an embedded file :func:`stream_file` reads at a time (at least one piece)."""


def stream_file(
    zs: ZS, chunk_id: str, stop: int, zero_copy: bool = False, start: int = 0
) -> Iterator[bytes | memoryview]:
    """Bytes ``[start, stop)`` of an embedded chunk file as its pieces (the first and last cut to the range),
    read about :data:`STREAM_WINDOW` bytes at a time, so that memory does not follow a file's or a ref's
    length. ``zero_copy`` as for :func:`read_pieces`: a restore writes them out with no copy of its own.
    ZSCorrupt where pieces leave a gap, or end before ``stop``."""
    where = f"{zs.name}: embedded chunk {chunk_id}"
    at = start
    while at < stop:
        progress = at
        pieces, _ = _owned(zs, schema.CHUNK_DATA, (chunk_id,), at, min(at + STREAM_WINDOW, stop), zero_copy, where)
        for piece_start, data in pieces:
            if piece_start + len(data) <= at:
                continue  # a piece already given
            if piece_start > at:
                raise ZSCorrupt(f"{where}: pieces leave a gap: bytes from {at} to {piece_start} are missing")
            data = data[at - piece_start : stop - piece_start]
            yield data
            at += len(data)
        if at == progress:
            raise ZSCorrupt(f"{where}: no piece holds byte {at} (the file ends before byte {stop})")


def keeps_virtual(zs: Any, key: tuple[Any, ...]) -> bool:
    """Whether the archive keeps the bytes of a virtual range (its pieces or an alias)."""
    return next(iter(zs.search(prefix=schema.key_prefix(schema.VIRTUAL_DATA, key))), None) is not None


def kept_ranges(zs: Any) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Every virtual range the archive keeps (its ``E`` key, ``(location, offset, length, etag,
    last_modified)``) -> the key whose pieces hold its bytes (itself, or the checksum its alias names)."""
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    aliases = []
    for rec in zs.search(prefix=schema.VIRTUAL_DATA):
        key, data = _split(rec, f"{zs.name}: virtual chunk data")
        if len(key) == 6:
            out[key[:5]] = key[:5]
        else:
            aliases.append(VirtualRangeKey(*key[:3], *VirtualAliasValue.decode(data, zs.name)).encode())
            out[key] = aliases[-1]
    for key, target in out.items():
        if out.get(target) != target:
            raise ZSCorrupt(
                f"{zs.name}: the alias of virtual range {key[0]} [{key[1]}, {key[1] + key[2]}) names "
                f"checksum {target[3:]}, whose range the archive does not hold"
            )
    return out
