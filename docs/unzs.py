#!/usr/bin/env python3
"""unzs: the emergency decoder for ZS v0.10 files.  Usage: python3 unzs.py FILE.zs > records

Standard library only (Python 3.6+). Walks the index from the root down, checks the header's
and every block's CRC-64, the file length and the data's SHA-256, decompresses blocks (none,
deflate, lzma2;dsize=2^20) and writes each record and a newline, exactly as ``zs dump FILE``.
Damage stops it with one line on stderr naming the file and offset, and exit status 1.
"""

import hashlib
import json
import lzma
import struct
import sys
import zlib

MAGIC, PARTIAL = b"\xabZSfiLe\x01", b"\xabZStoBe\x01"  # a whole file; one a writer never finished


class Corrupt(Exception):  # the file is not a whole, intact ZS v0.10 file
    pass


def _crc_entry(n):
    for _ in range(8):
        n = (n >> 1) ^ 0xC96C5795D7870F42 if n & 1 else n >> 1  # CRC-64-xz (ECMA-182), reflected
    return n


CRC_TABLE = [_crc_entry(n) for n in range(256)]


def crc64(data):  # CRC-64-xz: poly 0x42f0e1eba9ea3693 reflected, init and xorout all ones
    crc, table = 0xFFFFFFFFFFFFFFFF, CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def uleb128(buf, pos, where):
    """(value, next position) of the shortest-form uleb128 at buf[pos]."""
    value, start = 0, pos
    while pos < len(buf):
        byte, pos = buf[pos], pos + 1
        value |= (byte & 0x7F) << 7 * (pos - start - 1)
        if byte < 0x80:
            if byte == 0 and pos - start > 1:
                raise Corrupt(f"{where}: uleb128 at byte {start} is not in shortest form")
            return value, pos
    raise Corrupt(f"{where}: uleb128 at byte {start} runs past the end")


def whole(decompressor, data):  # one complete stream, nothing after it
    out = decompressor.decompress(data)
    if not decompressor.eof or decompressor.unused_data:
        raise ValueError("compressed stream truncated or followed by junk")
    return out


LZMA2 = [{"id": lzma.FILTER_LZMA2, "dict_size": 2**20}]
CODECS = {"none": bytes, "deflate": lambda z: whole(zlib.decompressobj(-15), z),  # raw deflate
          "lzma2;dsize=2^20": lambda z: whole(lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=LZMA2), z)}


def read_block(f, size, decompress, offset, length, seen):
    """``(level, payload)`` of the block of ``length`` bytes at ``offset``."""
    where = f"offset {offset}"
    if offset in seen or offset < 0 or length < 10 or offset + length > size:
        raise Corrupt(f"{where}: the index points here twice or at {length} bytes outside the file")
    seen.add(offset)  # each block is read once: a hostile index cannot make the walk loop or explode
    f.seek(offset)
    raw = f.read(length)
    body_length, pos = uleb128(raw, 0, where)
    if pos + body_length + 8 != length or body_length < 1:
        raise Corrupt(f"{where}: block length field says {body_length}, the index {length} in all")
    body = raw[pos:pos + body_length]
    if crc64(body) != struct.unpack("<Q", raw[-8:])[0]:
        raise Corrupt(f"{where}: block CRC mismatch")
    try:
        return body[0], decompress(body[1:])
    except (zlib.error, lzma.LZMAError, ValueError, MemoryError) as exc:
        raise Corrupt(f"{where}: payload does not decompress: {exc}") from None


def data_blocks(f, size, decompress, offset, length, levels, seen):
    """The records of each data block under the block at ``offset`` (of a level in ``levels``)."""
    level, payload = read_block(f, size, decompress, offset, length, seen)
    where, pos, records = f"offset {offset}", 0, []
    if level not in levels:
        raise Corrupt(f"{where}: found a block of level {level} where the index needs {min(levels)}")
    while pos < len(payload):
        n, pos = uleb128(payload, pos, where)
        if level == 0:
            if pos + n > len(payload):
                raise Corrupt(f"{where}: record {len(records)} runs past the end of the block")
            records.append(payload[pos:pos + n])
            pos += n
        else:  # an index entry: key, child offset, child length
            child_offset, pos = uleb128(payload, pos + n, where)
            child_length, pos = uleb128(payload, pos, where)
            yield from data_blocks(f, size, decompress, child_offset, child_length, (level - 1,), seen)
    if pos == 0:
        raise Corrupt(f"{where}: empty block payload")
    if level == 0:
        yield payload, records


def unzs(f, out):
    """Write every record of the ZS file open as ``f`` to the binary stream ``out``."""
    magic, (header_length,) = f.read(8), struct.unpack("<Q", f.read(8).ljust(8, b"\0"))
    if magic != MAGIC:
        raise Corrupt("offset 0: " + ("partially written (ZStoBe magic)" if magic == PARTIAL else "not a ZS file"))
    size = f.seek(0, 2)
    if header_length < 80 or 24 + header_length > size:
        raise Corrupt(f"offset 8: header length {header_length} does not fit the {size}-byte file")
    f.seek(16)
    header = f.read(header_length)
    if crc64(header) != struct.unpack("<Q", f.read(8))[0]:
        raise Corrupt(f"offset {16 + header_length}: header CRC mismatch")
    root_offset, root_length, total, sha256, codec, meta_length = struct.unpack_from("<QQQ32s16sQ", header)
    if total != size:
        raise Corrupt(f"offset 32: the header says {total} bytes, the file has {size}")
    try:
        if not isinstance(json.loads(header[80:80 + meta_length].decode("utf-8")), dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise Corrupt(f"offset 96: metadata is not a JSON object: {exc}") from None
    codec = codec.rstrip(b"\0").decode("ascii", "replace")
    if codec not in CODECS:
        raise Corrupt(f"offset 72: unknown codec {codec!r}")
    sha = hashlib.sha256()  # of the data payloads in file order, which the index order is
    # the root is an index block: level 1..63 (a data block is level 0, 64 and up are extensions)
    for payload, records in data_blocks(f, size, CODECS[codec], root_offset, root_length, range(1, 64), set()):
        sha.update(payload)
        out.write(b"\n".join(records) + b"\n")
    if sha.digest() != sha256:
        raise Corrupt("offset 40: data SHA-256 mismatch")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 unzs.py FILE.zs > records")
    try:
        with open(sys.argv[1], "rb") as f:
            unzs(f, sys.stdout.buffer)
    except (Corrupt, OSError) as exc:
        sys.stdout.buffer.flush()  # the records before the damage, then the message
        sys.exit(f"unzs: {sys.argv[1]}: {exc}")
