"""Block framing (length, level, payload, CRC) and the data / index payload layouts."""

from __future__ import annotations

import struct
from typing import Any, Iterable

from zsarchive.errors import ZSCorrupt
from zsarchive.typedtuple import TypedTuple
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.crc64 import crc64

try:
    from zsarchive.zs.format import _framing

    c_framing = _framing  # framing.py reads it here: a test sets it to None to run the Python loops
except ImportError:  # installed without a C compiler: the Python loops here do the same work, slower
    c_framing = None  # type: ignore[assignment]

MAX_INDEX_LEVEL = 63
"""Levels 1-63 are index blocks; 64 and up are extension blocks, which readers skip."""
MIN_BLOCK_LENGTH = 10
"""The smallest framed block: one length byte, the level byte and the CRC."""
MAX_LENGTH_FIELD = 10
"""A u64 needs at most 10 uleb128 bytes; a longer length field is corrupt whatever it says."""
_U64 = struct.Struct("<Q")
_ONE_BYTE = [bytes((i,)) for i in range(128)]


class IndexEntry(TypedTuple):
    """One index payload entry: separator key and the child block's file extent."""

    key: bytes
    offset: int
    length: int


def encode_block(level: int, zpayload: bytes) -> bytes:
    """Frame a compressed payload: uleb128 length, level byte, payload, CRC-64 of level+payload."""
    return b"".join(block_parts(level, [zpayload]))


def block_parts(level: int, zparts: list[Any]) -> list[Any]:
    """:func:`encode_block` of the payload that the buffers ``zparts`` are the concatenation of, as a
    list of buffers (``zparts`` themselves between the length and the CRC: no byte is copied)."""
    head = bytes((level,))
    crc = crc64(head)
    for part in zparts:
        crc = crc64(part, crc)  # a CRC continued over the next bytes: the CRC of the concatenation
    return [uleb128.encode(1 + sum(map(len, zparts))), head, *zparts, _U64.pack(crc)]


def decode_length(field: bytes | memoryview, where: str, end: str = "the file") -> tuple[int, int]:
    """Decode a block's length field from its first bytes; return ``(body_length, field_length)``.

    ``field`` holds the next MAX_LENGTH_FIELD bytes, or fewer only where ``end`` (named in the
    message) comes first. The body is the level byte plus the compressed payload, CRC excluded.
    """
    if all(byte & 0x80 for byte in field[:MAX_LENGTH_FIELD]):
        problem = (
            f"runs past the end of {end}"
            if len(field) < MAX_LENGTH_FIELD
            else f"is longer than {MAX_LENGTH_FIELD} bytes"
        )
        raise ZSCorrupt(f"{where}: block length field {problem}")
    try:
        length, field_length = uleb128.decode(field, 0)
    except ZSCorrupt:
        raise ZSCorrupt(f"{where}: block length field is not in shortest uleb128 form") from None
    if length == 0:
        raise ZSCorrupt(f"{where}: block length is 0 (a block holds at least its level byte)")
    return length, field_length


def check_crc(body: bytes | memoryview, stored: int, where: str) -> None:
    """Raise ZSCorrupt unless ``stored`` is the CRC-64 of a block body (level byte + payload)."""
    actual = crc64(body)
    if stored != actual:
        raise ZSCorrupt(f"{where}: block CRC mismatch (stored {stored:#018x}, computed {actual:#018x})")


def split_block(buf: bytes | memoryview, where: str) -> tuple[int, memoryview]:
    """Check a whole framed block (length field through CRC) and return ``(level, zpayload)``, the
    payload a view into ``buf`` (no copy).

    ``where`` names file and offset for messages. The buffer must hold exactly one block.
    """
    length, pos = decode_length(buf[:MAX_LENGTH_FIELD], where, "its extent")
    end = pos + length
    if end + 8 != len(buf):
        raise ZSCorrupt(
            f"{where}: block length field says {end + 8} bytes with CRC, "
            f"but {len(buf)} bytes are available for this block"
        )
    body = memoryview(buf)[pos:end]
    check_crc(body, _U64.unpack_from(buf, end)[0], where)
    return body[0], body[1:]


def encode_records(records: Iterable[bytes]) -> bytes:
    """Encode a data payload: each record as uleb128 length + bytes (one-byte lengths fast)."""
    records = records if isinstance(records, list) else list(records)
    lens = list(map(len, records))
    if not lens:
        return b""
    if max(lens) < 0x80:
        parts = [b""] * (2 * len(records))
        parts[::2] = map(_ONE_BYTE.__getitem__, lens)
        parts[1::2] = records
        return b"".join(parts)
    enc = uleb128.encode
    return b"".join([enc(n) + r for n, r in zip(lens, records)])


def record_parts(records: list[Any]) -> list[Any]:
    """:func:`encode_records` as a list of buffers (each record's length, then the record itself)."""
    enc = uleb128.encode
    parts: list[Any] = [b""] * (2 * len(records))
    parts[::2] = [enc(len(r)) for r in records]
    parts[1::2] = records
    return parts


def decode_records(payload: bytes, where: str) -> list[bytes]:
    """Split a data payload into records; raise ZSCorrupt on bad framing or an empty payload."""
    if c_framing is not None and (records := c_framing.split(payload)) is not None:
        return records
    records = []
    append = records.append
    pos = 0
    n = len(payload)
    # The hot loop of every scan: one-byte lengths take the short path; a record running past
    # the end can only be the last one, so the bounds check waits until after the loop.
    if payload.isascii():  # no byte >= 0x80: every length field is one byte
        while pos < n:
            start = pos + 1
            pos = start + payload[pos]
            append(payload[start:pos])
    else:
        while pos < n:
            start = pos + 1
            length = payload[pos]
            if length >= 0x80:
                length, start = uleb128.decode(payload, pos, f"{where}: record {len(records)} length")
            pos = start + length
            append(payload[start:pos])
    if pos > n:
        raise ZSCorrupt(
            f"{where}: record {len(records) - 1} length {len(records[-1]) + pos - n} runs past "
            f"the end of the {n}-byte payload"
        )
    if not records:
        raise ZSCorrupt(f"{where}: data block payload holds no records")
    return records


def encode_index(entries: Iterable[IndexEntry]) -> bytes:
    """Encode an index payload from (key, offset, length) entries."""
    enc = uleb128.encode
    return b"".join([enc(len(k)) + k + enc(o) + enc(n) for k, o, n in entries])


def decode_index(payload: bytes, where: str) -> list[IndexEntry]:
    """Split an index payload into entries; raise ZSCorrupt on bad framing, an empty payload or
    keys out of order."""
    entries: list[IndexEntry] = []
    pos = 0
    n = len(payload)
    decode = uleb128.decode
    while pos < n:
        i = len(entries)
        klen, pos = decode(payload, pos, f"{where}: index entry {i} key length")
        if pos + klen > n:
            raise ZSCorrupt(f"{where}: index entry {i} key length {klen} runs past the payload end")
        key = payload[pos : pos + klen]
        pos += klen
        offset, pos = decode(payload, pos, f"{where}: index entry {i} offset")
        length, pos = decode(payload, pos, f"{where}: index entry {i} length")
        entries.append(IndexEntry(key, offset, length))
    if not entries:
        raise ZSCorrupt(f"{where}: index block payload holds no entries")
    for i in range(1, len(entries)):
        if entries[i].key < entries[i - 1].key:
            raise ZSCorrupt(
                f"{where}: index keys out of order: entry {i} key {entries[i].key[:60]!r} "
                f"sorts before entry {i - 1} key {entries[i - 1].key[:60]!r}"
            )
    return entries
