"""Block framing (length, level, payload, CRC) and the data / index payload layouts."""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

from zsarchive.errors import ZSCorrupt
from zsarchive.zs.format import uleb128
from zsarchive.zs.format.crc64 import crc64

try:
    from zsarchive.zs.format import _framing as c_framing
except ImportError:  # installed without a C compiler: the Python loops here do the same work, slower
    c_framing = None

MAX_INDEX_LEVEL = 63
_U64 = struct.Struct("<Q")


class IndexEntry(NamedTuple):
    """One index payload entry: separator key and the child block's file extent."""

    key: bytes
    offset: int
    length: int


def encode_block(level: int, zpayload: bytes) -> bytes:
    """Frame a compressed payload: uleb128 length, level byte, payload, CRC-64 of level+payload."""
    body = bytes((level,)) + zpayload
    return uleb128.encode(len(body)) + body + _U64.pack(crc64(body))


def split_block(buf, where: str) -> tuple[int, bytes]:
    """Check a whole framed block (length field through CRC) and return ``(level, zpayload)``.

    ``where`` names file and offset for messages. The buffer must hold exactly one block.
    """
    length, pos = uleb128.decode(buf, 0, f"{where}: block length")
    if length == 0:
        raise ZSCorrupt(f"{where}: block length is 0 (a block needs at least its level byte)")
    end = pos + length
    if end + 8 != len(buf):
        raise ZSCorrupt(f"{where}: block length field says {end + 8} bytes with CRC, "
                        f"but {len(buf)} bytes are available for this block")
    body = buf[pos:end]
    (stored,) = _U64.unpack_from(buf, end)
    actual = crc64(body)
    if stored != actual:
        raise ZSCorrupt(f"{where}: block CRC mismatch (stored {stored:#018x}, computed {actual:#018x})")
    return body[0], bytes(body[1:])


def encode_records(records: Iterable[bytes]) -> bytes:
    """Encode a data payload: each record as uleb128 length + bytes."""
    enc = uleb128.encode
    return b"".join([enc(len(r)) + r for r in records])


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
        raise ZSCorrupt(f"{where}: record {len(records) - 1} length {len(records[-1]) + pos - n} runs past "
                        f"the end of the {n}-byte payload")
    if not records:
        raise ZSCorrupt(f"{where}: data block payload holds no records")
    return records


def encode_index(entries: Iterable[IndexEntry]) -> bytes:
    """Encode an index payload from (key, offset, length) entries."""
    enc = uleb128.encode
    return b"".join([enc(len(k)) + k + enc(o) + enc(n) for k, o, n in entries])


def decode_index(payload: bytes, where: str) -> list[IndexEntry]:
    """Split an index payload into entries; raise ZSCorrupt on bad framing or an empty payload."""
    entries = []
    pos = 0
    n = len(payload)
    decode = uleb128.decode
    while pos < n:
        i = len(entries)
        klen, pos = decode(payload, pos, f"{where}: index entry {i} key length")
        if pos + klen > n:
            raise ZSCorrupt(f"{where}: index entry {i} key length {klen} runs past the payload end")
        key = payload[pos:pos + klen]
        pos += klen
        offset, pos = decode(payload, pos, f"{where}: index entry {i} offset")
        length, pos = decode(payload, pos, f"{where}: index entry {i} length")
        entries.append(IndexEntry(key, offset, length))
    if not entries:
        raise ZSCorrupt(f"{where}: index block payload holds no entries")
    return entries
