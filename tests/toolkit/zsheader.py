"""A ZS file's header edited in place, its CRC made right again: a header that checks out and says
something else."""

from __future__ import annotations

import struct

from zsarchive.zs.format.crc64 import crc64


def with_header_field(data: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with header bytes at ``offset`` replaced by ``value`` and the header CRC recomputed."""
    (length,) = struct.unpack_from("<Q", data, 8)
    out = bytearray(data)
    out[offset : offset + len(value)] = value
    out[16 + length : 24 + length] = struct.pack("<Q", crc64(bytes(out[16 : 16 + length])))
    return bytes(out)
