"""The common binary header of Icechunk metadata files, and unwrapping their (zstd) payload."""

from __future__ import annotations

import hashlib

import zstandard

from zsarchive.errors import ZSCorrupt
from zsarchive.icechunk.model import FileHeader, FileType
from zsarchive.limits import Malformed, TooLarge, icechunk_limit, unzstd

MAGIC = "ICE🧊CHUNK".encode("utf-8")
NAME_BYTES = 24
"""The header's room for the implementation name (UTF-8, padded with spaces)."""
HEADER_LENGTH = len(MAGIC) + NAME_BYTES + 3
COMPRESSION_NONE = 0
COMPRESSION_ZSTD = 1
FILE_TYPE_NAMES = {
    FileType.SNAPSHOT: "snapshot",
    FileType.MANIFEST: "manifest",
    FileType.TRANSACTION_LOG: "transaction-log",
    FileType.REPO_INFO: "repo-info",
}


def parse_header(raw: bytes, name: str) -> FileHeader:
    """The header at the start of ``raw`` (the file ``name``); ZSCorrupt if it is not one."""
    if len(raw) < HEADER_LENGTH:
        if not MAGIC.startswith(bytes(raw[:len(MAGIC)])):
            raise ZSCorrupt(f"{name}: not an Icechunk file (wrong magic at offset 0)")
        raise ZSCorrupt(f"{name}: truncated: {len(raw)} bytes, the header alone needs {HEADER_LENGTH}")
    if raw[:len(MAGIC)] != MAGIC:
        raise ZSCorrupt(f"{name}: not an Icechunk file (wrong magic at offset 0)")
    impl_raw = bytes(raw[len(MAGIC):len(MAGIC) + NAME_BYTES])
    try:
        implementation = impl_raw.decode("utf-8").rstrip(" ")
    except UnicodeDecodeError:
        raise ZSCorrupt(f"{name}: implementation name at offset {len(MAGIC)} is not UTF-8") from None
    spec_version, file_type, compression = raw[HEADER_LENGTH - 3:HEADER_LENGTH]
    if spec_version not in (1, 2):
        raise ZSCorrupt(f"{name}: unknown spec version {spec_version} at offset {HEADER_LENGTH - 3}")
    try:
        kind = FileType(file_type)
    except ValueError:
        raise ZSCorrupt(f"{name}: unknown file type {file_type} at offset {HEADER_LENGTH - 2}") from None
    if compression not in (COMPRESSION_NONE, COMPRESSION_ZSTD):
        raise ZSCorrupt(f"{name}: unknown compression {compression} at offset {HEADER_LENGTH - 1}")
    return FileHeader(implementation, spec_version, kind, compression)


def open_file(raw: bytes, name: str, expected: FileType) -> tuple[FileHeader, bytes]:
    """Check the header of ``raw`` says ``expected`` and return it with the decompressed payload."""
    header = parse_header(raw, name)
    if header.file_type != expected:
        raise ZSCorrupt(f"{name}: file type is {FILE_TYPE_NAMES[header.file_type]}, "
                        f"expected {FILE_TYPE_NAMES[expected]}")
    body = raw[HEADER_LENGTH:]
    if header.compression == COMPRESSION_NONE:
        return header, bytes(body)
    try:
        return header, unzstd(body, icechunk_limit(len(body)), "ZSARCHIVE_MAX_ICECHUNK")
    except Malformed as exc:
        problem = "is truncated" if "truncated" in str(exc) else "has stray bytes after it"
        raise ZSCorrupt(f"{name}: zstd payload at offset {HEADER_LENGTH} {problem}") from None
    except (zstandard.ZstdError, TooLarge) as exc:
        raise ZSCorrupt(f"{name}: zstd payload at offset {HEADER_LENGTH} does not decompress: {exc}") from None


_SMALL = 1 << 18
"""Payloads up to this many bytes may be compressed at the slowest levels while a size is sought."""

IMPLEMENTATION = "zsarchive"
"""The implementation name zsarchive writes in headers when the original one is not known."""


def wrap_file(file_type: FileType, spec_version: int, payload: bytes, implementation: str = IMPLEMENTATION,
              size: int | None = None) -> bytes:
    """A whole metadata file: the header, then ``payload`` (a finished FlatBuffer) as one zstd frame at
    level 3 with its content size and no checksum, as icechunk writes it.

    ``size``: the file must be exactly this long (a snapshot names its manifests' sizes, and icechunk
    reads that many bytes). Bytes after a FlatBuffer's end are never read, so incompressible ones are
    appended to the payload until the file is that long (at a higher level if it is too long at 3);
    ValueError if it cannot be.
    """
    name = implementation.encode("utf-8")
    if len(name) > NAME_BYTES:
        raise ValueError(f"implementation name {implementation!r} is longer than {NAME_BYTES} bytes")
    head = MAGIC + name.ljust(NAME_BYTES, b" ") + bytes((spec_version, int(file_type), COMPRESSION_ZSTD))
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False)
    body = compressor.compress(payload)
    if not size or len(head) + len(body) == size:
        return head + body
    padded = _padded_frame(body, len(payload), size - len(head))
    if padded is not None:
        return head + padded
    filler = hashlib.shake_128(b"zsarchive filler").digest(2 * max(0, size - len(head)) + 64)
    # A checksum adds 4 bytes and a higher level may shrink what is too long at 3; the slow levels
    # only for small files.
    configs = [(3, False), (3, True), (9, False)] + ([(19, False), (19, True)] if len(payload) < _SMALL else [])
    for level, checksum in configs:
        compressor = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=checksum)

        def length(extra: int, zeros: int = 0) -> tuple[int, bytes]:
            body = compressor.compress(payload + filler[:extra] + bytes(zeros))
            return len(head) + len(body), body

        extra = size - length(0)[0]
        if extra < 0:
            continue  # filler only makes it longer
        for _ in range(8):  # filler compresses to about its length: correct by the error, a few times
            got, body = length(extra)
            if got == size:
                return head + body
            extra = max(0, extra - (got - size))
        for near in sorted(range(max(0, extra - 12), extra + 13), key=lambda n: abs(n - extra)):
            for zeros in (0, 1, 2, 3):
                got, body = length(near, zeros)
                if got == size:
                    return head + body
    raise ValueError(f"cannot make the file exactly {size} bytes long (it compresses to {len(head) + len(body)})")


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_RAW_BLOCK = 1 << 17
"""The most bytes one raw zstd block holds (and the decoders' block limit)."""


def _padded_frame(frame: bytes, content: int, size: int) -> bytes | None:
    """``frame`` (one zstd frame of ``content`` bytes, as compressed above) made exactly ``size`` bytes
    long by zero bytes after its content, in raw (stored) blocks: the payload is compressed once, and
    the filler costs 3 bytes of block header plus itself. None where the frame cannot be so made
    (shorter than it, or within a few bytes of it); the frame header keeps its window and its flags,
    only the content size grows (RFC 8878, 3.1.1)."""
    if len(frame) < 6 or frame[:4] != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    fcs_flag, single, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    if descriptor & 0b100 or dict_flag:
        return None  # a checksum or a dictionary id: not a frame written above
    start = 5 + (not single)
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    blocks = frame[start + fcs_size:]
    at, last = 0, None
    while at + 3 <= len(blocks):  # find the last block, to clear its "last" bit
        head = int.from_bytes(blocks[at:at + 3], "little")
        last = at
        at += 3 + (1 if (head >> 1) & 3 == 1 else head >> 3)
        if head & 1:
            break
    if last is None or at != len(blocks):
        return None
    body = bytearray(blocks)
    body[last] &= 0xFE
    # the content size in the frame's own field where the new size fits it (an empty stored block adds
    # just 3 bytes), else in a wider one; a 2-byte field holds the size less 256 (RFC 8878, 3.1.1.4)
    for flag, width in dict.fromkeys(((fcs_flag, fcs_size), (1, 2), (2, 4), (3, 8))):
        if width == 0:
            continue
        header = frame[:4] + bytes(((flag << 6) | (single << 5),)) + frame[5:start]
        extra = size - len(header) - width - len(body)
        blocks_needed = -(-extra // (_RAW_BLOCK + 3))
        filler = extra - 3 * blocks_needed  # the zero bytes after the block headers
        stored = content + filler - (256 if flag == 1 else 0)
        if extra < 3 or not 0 <= stored < 1 << (8 * width):
            continue
        out = bytearray(header + stored.to_bytes(width, "little") + body)
        for i in range(blocks_needed):
            n = min(filler, _RAW_BLOCK)
            filler -= n
            out += (n << 3 | (i == blocks_needed - 1)).to_bytes(3, "little") + bytes(n)
        return bytes(out)
    return None


def inspect_header(header: FileHeader) -> dict:
    """The header as icechunk's ``inspect_*`` methods report it (``written_by``, ``app_name`` ...)."""
    app_name, _, app_version = header.implementation.partition("-")
    return {
        "written_by": header.implementation,
        "app_name": app_name,
        "app_version": app_version,
        "spec_version": f"{header.spec_version}.0",
        "file_type": FILE_TYPE_NAMES[header.file_type],
        "compression": "zstd" if header.compression == COMPRESSION_ZSTD else "none",
    }
