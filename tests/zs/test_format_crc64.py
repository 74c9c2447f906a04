"""zsarchive.zs.format.crc64 is the CRC-64 of the xz format: checked against the spec's check value
and against the CRC-64 that liblzma itself stores in .xz files."""

from __future__ import annotations

import lzma
import struct

from hypothesis import given
from hypothesis import strategies as st

from zsarchive.zs.format.crc64 import crc64


def xz_crc64(data: bytes) -> int:
    """The check field liblzma writes for ``data`` in a one-block .xz stream with CHECK_CRC64."""
    stream = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
    (backward_size,) = struct.unpack_from("<I", stream, len(stream) - 8)  # footer: CRC32, backward size, flags, magic
    index_start = len(stream) - 12 - (backward_size + 1) * 4
    return struct.unpack_from("<Q", stream, index_start - 8)[0]  # the check ends the block


def test_the_check_value_of_the_spec():
    assert crc64(b"123456789") == 0x995DC9BBDF1939FA
    assert crc64(b"") == 0  # all-ones in, all-ones out


@given(st.binary(min_size=1, max_size=3000))  # liblzma writes no block, so no check, for b""
def test_equals_liblzma(data):
    assert crc64(data) == xz_crc64(data)


def test_memoryviews_and_bytearrays_give_the_same_crc():
    data = bytes(range(256)) * 5
    assert crc64(memoryview(data)[3:700]) == crc64(bytearray(data[3:700])) == xz_crc64(data[3:700])
