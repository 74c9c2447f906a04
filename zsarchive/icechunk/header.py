"""The common binary header of Icechunk metadata files, and unwrapping their (zstd) payload."""

from __future__ import annotations

import enum

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
        if not MAGIC.startswith(bytes(raw[: len(MAGIC)])):
            raise ZSCorrupt(f"{name}: not an Icechunk file (wrong magic at offset 0)")
        raise ZSCorrupt(f"{name}: truncated: {len(raw)} bytes, the header alone needs {HEADER_LENGTH}")
    if raw[: len(MAGIC)] != MAGIC:
        raise ZSCorrupt(f"{name}: not an Icechunk file (wrong magic at offset 0)")
    impl_raw = bytes(raw[len(MAGIC) : len(MAGIC) + NAME_BYTES])
    try:
        implementation = impl_raw.decode("utf-8").rstrip(" ")
    except UnicodeDecodeError:
        raise ZSCorrupt(f"{name}: implementation name at offset {len(MAGIC)} is not UTF-8") from None
    spec_version, file_type, compression = raw[HEADER_LENGTH - 3 : HEADER_LENGTH]
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
        raise ZSCorrupt(
            f"{name}: file type is {FILE_TYPE_NAMES[header.file_type]}, expected {FILE_TYPE_NAMES[expected]}"
        )
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


IMPLEMENTATION = "zsarchive"
"""The implementation name zsarchive writes in headers when the original one is not known."""


class FrameForm(enum.Enum):
    """How an icechunk version frames a file's zstd payload."""

    SIZED = "sized"
    """The content size in the frame header (icechunk 2.3 ...)."""
    UNSIZED = "unsized"
    """No content size (icechunk up to 2.1 at least, Rust crate 0.x with icechunk 1.x)."""


def frame_form(implementation: str) -> FrameForm:
    """The frame form of the files an implementation (a header's name, ``ic-2.3.0`` ...) writes, as far as
    it is known: the Rust crates 0.x (icechunk 1.x), 2.0 and 2.1 wrote no content size; 2.3 writes it, and
    so does zsarchive for any other name."""
    return FrameForm.UNSIZED if implementation.startswith(("ic-0.", "ic-1.", "ic-2.0.", "ic-2.1.")) else FrameForm.SIZED


def compressor(form: FrameForm, content: int, level: int = 3) -> zstandard.ZstdCompressionObj:
    """A streaming compressor of ``content`` bytes framed in ``form``: at ``level``, no checksum. Fed in
    pieces of any size, it gives the bytes icechunk's compressor gives for the whole payload (libzstd's
    output does not depend on the pieces)."""
    sized = form is FrameForm.SIZED
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=sized, write_checksum=False)
    return cctx.compressobj(size=content if sized else -1)


def _head(file_type: FileType, spec_version: int, implementation: str) -> bytes:
    name = implementation.encode("utf-8")
    if len(name) > NAME_BYTES:
        raise ValueError(f"implementation name {implementation!r} is longer than {NAME_BYTES} bytes")
    return MAGIC + name.ljust(NAME_BYTES, b" ") + bytes((spec_version, int(file_type), COMPRESSION_ZSTD))


def wrap_file(
    file_type: FileType,
    spec_version: int,
    payload: bytes | bytearray,
    implementation: str = IMPLEMENTATION,
    level: int = 3,
) -> bytes:
    """A whole metadata file: the header, then ``payload`` (a finished FlatBuffer) as one zstd frame, as
    icechunk writes it (:func:`compressor`)."""
    stream = compressor(frame_form(implementation), len(payload), level)
    return wrap_frame(file_type, spec_version, stream.compress(payload) + stream.flush(), len(payload), implementation)


def wrap_frame(
    file_type: FileType,
    spec_version: int,
    frame: bytes | bytearray,
    content: int,
    implementation: str = IMPLEMENTATION,
    size: int | None = None,
) -> bytes:
    """The header, then ``frame`` (one zstd frame of ``content`` bytes, from :func:`compressor`).

    ``size``: the length the file should have (a snapshot names its manifests' sizes, and icechunk reads
    that many bytes). Bytes after a FlatBuffer's end are never read: a frame that comes out shorter is
    lengthened with zero bytes after its content, in stored zstd blocks. The file keeps the frame's own
    length where it cannot be made that long (longer, or within two bytes of it): the caller tells.
    """
    head = _head(file_type, spec_version, implementation)
    if size and len(head) + len(frame) != size:
        padded = _padded_frame(frame, content, size - len(head))
        if padded is not None:
            return head + padded
    return head + frame


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_RAW_BLOCK = 1 << 17
"""The most bytes one raw zstd block holds (and the decoders' block limit)."""


def _padded_frame(frame: bytes | bytearray, content: int, size: int) -> bytes | None:
    """``frame`` (one zstd frame of ``content`` bytes, as compressed above) made exactly ``size`` bytes
    long by zero bytes after its content, in raw (stored) blocks: the payload is compressed once, and
    the filler costs 3 bytes of block header plus itself. None where the frame cannot be so made
    (shorter than it, or within a few bytes of it); the frame header keeps its window and its flags,
    only the content size grows, or stays absent where the frame has none (RFC 8878, 3.1.1)."""
    if len(frame) < 6 or frame[:4] != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    fcs_flag, single, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    if descriptor & 0b100 or dict_flag:
        return None  # a checksum or a dictionary id: not a frame written above
    start = 5 + (not single)
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    blocks = frame[start + fcs_size :]
    at, last = 0, None
    while at + 3 <= len(blocks):  # find the last block, to clear its "last" bit
        head = int.from_bytes(blocks[at : at + 3], "little")
        last = at
        at += 3 + (1 if (head >> 1) & 3 == 1 else head >> 3)
        if head & 1:
            break
    if last is None or at != len(blocks):
        return None
    body = bytearray(blocks)
    body[last] &= 0xFE
    # the content size in the frame's own field where the new size fits it (an empty stored block adds
    # just 3 bytes; a frame without one keeps none), else in a wider one; a 2-byte field holds the size
    # less 256 (RFC 8878, 3.1.1.4)
    for flag, width in dict.fromkeys(((fcs_flag, fcs_size), (1, 2), (2, 4), (3, 8))):
        header = frame[:4] + bytes(((flag << 6) | (single << 5),)) + frame[5:start]
        extra = size - len(header) - width - len(body)
        blocks_needed = -(-extra // (_RAW_BLOCK + 3))
        filler = extra - 3 * blocks_needed  # the zero bytes after the block headers
        stored = content + filler - (256 if flag == 1 else 0)
        if extra < 3 or (width and not 0 <= stored < 1 << (8 * width)):
            continue
        out = bytearray(header + (stored.to_bytes(width, "little") if width else b"") + body)
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
