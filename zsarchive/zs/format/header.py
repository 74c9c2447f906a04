"""The ZS file header: magic, u64le fields, codec, JSON metadata, header CRC."""

from __future__ import annotations

from typing import Any

import json
import struct

from zsarchive.errors import ZSCorrupt, ZSError
from zsarchive.typedtuple import TypedTuple
from zsarchive.zs.format.block import MIN_BLOCK_LENGTH
from zsarchive.zs.format.codecs import decoder_for
from zsarchive.zs.format.crc64 import crc64

MAGIC = b"\xabZSfiLe\x01"
PARTIAL_MAGIC = b"\xabZStoBe\x01"
CODEC_FIELD_LENGTH = 16
_FIXED = struct.Struct("<QQQ32s16sQ")  # root offset, root length, file length, sha256, codec, metadata length
PREFIX_LENGTH = 16  # magic + header length
# File offsets of the header fields, named in error messages.
HEADER_LENGTH_AT = 8
ROOT_OFFSET_AT = 16
ROOT_LENGTH_AT = 24
TOTAL_LENGTH_AT = 32
SHA256_AT = 40
CODEC_AT = 72
METADATA_LENGTH_AT = 88
METADATA_AT = PREFIX_LENGTH + _FIXED.size


class Header(TypedTuple):
    """Decoded header data (everything between the header length and the header CRC)."""

    root_index_offset: int
    root_index_length: int
    total_file_length: int
    data_sha256: bytes
    codec: str
    metadata: dict[str, Any]
    extensions: bytes = b""

    def encode(self) -> bytes:
        """Return magic-less header bytes: u64le length, header data, CRC-64."""
        meta = json.dumps(self.metadata, sort_keys=True, ensure_ascii=True).encode("utf-8")
        codec = self.codec.encode("ascii")
        if len(codec) > CODEC_FIELD_LENGTH:
            raise ValueError(f"codec name {self.codec!r} longer than {CODEC_FIELD_LENGTH} bytes")
        data = (
            _FIXED.pack(
                self.root_index_offset,
                self.root_index_length,
                self.total_file_length,
                self.data_sha256,
                codec.ljust(CODEC_FIELD_LENGTH, b"\0"),
                len(meta),
            )
            + meta
            + self.extensions
        )
        return struct.pack("<Q", len(data)) + data + struct.pack("<Q", crc64(data))


def blocks_start(header_length: int) -> int:
    """File offset of the first block for a header of ``header_length`` data bytes."""
    return PREFIX_LENGTH + header_length + 8


def check_magic(magic: bytes, name: str) -> None:
    """Raise ZSCorrupt unless ``magic`` is the good ZS magic, with a clear word for partial files."""
    if magic == MAGIC:
        return
    if magic == PARTIAL_MAGIC:
        raise ZSCorrupt(
            f"{name}: offset 0: ZStoBe magic: this file was only partially written "
            "(the writer was interrupted or failed); it is not a valid ZS file"
        )
    if len(magic) < len(MAGIC):
        raise ZSCorrupt(f"{name}: offset 0: file is {len(magic)} bytes, too short to be a ZS file")
    # never the bytes themselves: a file named by input may be anyone's (a fragment's base, say)
    raise ZSCorrupt(f"{name}: offset 0: bad magic (the file does not start as a ZS file does): not a ZS file")


def header_length_of(prefix: bytes, name: str) -> int:
    """Check the 16-byte file prefix (magic + length) and return the header data length."""
    check_magic(bytes(prefix[:8]), name)
    if len(prefix) < PREFIX_LENGTH:
        raise ZSCorrupt(f"{name}: offset {HEADER_LENGTH_AT}: file ends inside the header length field")
    length: int = struct.unpack_from("<Q", prefix, 8)[0]
    if length < _FIXED.size:
        raise ZSCorrupt(
            f"{name}: offset {HEADER_LENGTH_AT}: header length {length} is shorter than the "
            f"{_FIXED.size} bytes of fixed header fields"
        )
    return length


def decode(data: bytes, crc_bytes: bytes, name: str) -> Header:
    """Decode header data (after the length field) and verify its CRC; raise ZSCorrupt naming ``name``."""
    if len(crc_bytes) != 8:
        raise ZSCorrupt(f"{name}: offset {PREFIX_LENGTH + len(data)}: file ends inside the header")
    (stored,) = struct.unpack("<Q", crc_bytes)
    actual = crc64(data)
    if stored != actual:
        raise ZSCorrupt(
            f"{name}: offset {PREFIX_LENGTH + len(data)}: header CRC mismatch "
            f"(stored {stored:#018x}, computed {actual:#018x})"
        )
    root_off, root_len, file_len, sha, codec_raw, meta_len = _FIXED.unpack_from(data, 0)
    codec_raw = codec_raw.rstrip(b"\0")
    try:
        codec = codec_raw.decode("ascii")
    except UnicodeDecodeError:
        raise ZSCorrupt(f"{name}: offset {CODEC_AT}: codec field is not ASCII: {codec_raw!r}") from None
    meta_start = _FIXED.size
    if meta_start + meta_len > len(data):
        raise ZSCorrupt(
            f"{name}: offset {METADATA_LENGTH_AT}: metadata length {meta_len} "
            f"runs past the end of the {len(data)}-byte header"
        )
    meta_raw = data[meta_start : meta_start + meta_len]
    try:
        metadata = json.loads(meta_raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZSCorrupt(f"{name}: offset {METADATA_AT}: metadata is not UTF-8 JSON: {exc}") from None
    except RecursionError:
        raise ZSCorrupt(f"{name}: offset {METADATA_AT}: metadata JSON is nested too deeply") from None
    if not isinstance(metadata, dict):
        raise ZSCorrupt(
            f"{name}: offset {METADATA_AT}: metadata is JSON but not an object (got {type(metadata).__name__})"
        )
    return Header(root_off, root_len, file_len, bytes(sha), codec, metadata, bytes(data[meta_start + meta_len :]))


def header_end(prefix: bytes, size: int, name: str) -> int:
    """Check the 16-byte prefix of a ``size``-byte file; return the header's end (where blocks start)."""
    length = header_length_of(prefix, name)
    end = blocks_start(length)
    if end > size:
        raise ZSCorrupt(
            f"{name}: offset {HEADER_LENGTH_AT}: header length {length} runs past the end of the {size}-byte file"
        )
    return end


def parse(head: bytes, size: int, name: str) -> tuple[Header, int]:
    """Decode the header of a ``size``-byte file from its first ``header_end`` bytes or more;
    return it and where the blocks start.

    Checks all that the header alone can say: magic, CRC, fields, a known codec, the file's total
    length and a root extent inside the blocks area.
    """
    end = header_end(head[:PREFIX_LENGTH], size, name)
    if len(head) < end:
        raise ZSCorrupt(f"{name}: offset {len(head)}: file ends inside the header")
    hdr = decode(head[PREFIX_LENGTH : end - 8], head[end - 8 : end], name)
    try:
        decoder_for(hdr.codec)
    except ZSError:
        raise ZSCorrupt(
            f"{name}: offset {CODEC_AT}: unknown codec {hdr.codec!r} (known: none, deflate, lzma2;dsize=2^20, zstd)"
        ) from None
    if hdr.total_file_length != size:
        raise ZSCorrupt(
            f"{name}: offset {TOTAL_LENGTH_AT}: header says the file is {hdr.total_file_length} "
            f"bytes, but it is {size} bytes (truncated or appended to)"
        )
    offset, length = hdr.root_index_offset, hdr.root_index_length
    if not (end <= offset and MIN_BLOCK_LENGTH <= length and offset + length <= size):
        raise ZSCorrupt(
            f"{name}: offset {ROOT_OFFSET_AT}: root index block ({length} bytes at offset "
            f"{offset}) lies outside the block region {end}..{size}"
        )
    return hdr, end
