"""Records from a binary stream, as ``zs make`` takes them: terminated (each record followed by a
terminator) or length-prefixed (each preceded by its length as uleb128 or u64le).
"""

from __future__ import annotations

import struct
from typing import Iterator, Protocol

from zsarchive.errors import ZSError
from zsarchive.zs.format import uleb128

READ_SIZE = 1 << 20
"""Bytes asked of the stream at a time for length-prefixed input."""
SHOW = 60
"""Bytes of a record quoted in error messages."""


class BinaryInput(Protocol):
    """What ``zs make`` reads records from: a binary file, or anything that reads and closes as one."""

    def read(self, n: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


def show_record(record) -> str:
    """A short repr of a record for error messages."""
    if isinstance(record, (bytes, bytearray)) and len(record) > SHOW:
        return f"{bytes(record[:SHOW])!r}... ({len(record)} bytes)"
    return repr(record)


def _name(file) -> str:
    return str(getattr(file, "name", "input"))


def terminated_chunks(file: BinaryInput, approx: int, terminator: bytes) -> Iterator[bytes]:
    """Chunks of about ``approx`` bytes, each holding whole records and ending with ``terminator``."""
    # Like the reference: read ~approx bytes, cut after the last terminator, and leave splitting
    # the chunk to a writer thread; the tail is carried into the next read.
    read = file.read
    partial = b""
    tlen = len(terminator)
    while True:
        buf = read(approx)
        if not buf:
            break
        if not isinstance(buf, bytes):
            raise ZSError(f"{_name(file)}: read() gave {type(buf).__name__}, not bytes: open the input in binary mode")
        if partial:
            # Search only the new bytes (and a terminator straddling the seam).
            start = max(0, len(partial) - tlen + 1)
            buf = partial + buf
            first_end = buf.find(terminator, start)
            if first_end < 0:
                partial = buf
                continue
            if first_end >= approx:
                # The carried record is as large as a block: it gets a block of its own.
                end = first_end + tlen
                yield buf[:end]
                buf = buf[end:]
        cut = buf.rfind(terminator)
        if cut < 0:
            partial = buf
            continue
        end = cut + tlen
        yield buf[:end] if end < len(buf) else buf
        partial = buf[end:]
    if partial:
        raise ZSError(
            f"{_name(file)}: input does not end with the terminator "
            f"{terminator!r}: {len(partial)} trailing bytes ({show_record(partial)})"
        )


def _read_rest(read, head: bytes, n: int, name: str, what: str) -> bytes:
    """Complete ``head`` to ``n`` bytes, reading in bounded pieces (a bogus huge length must not
    allocate it all at once)."""
    parts = [head]
    have = len(head)
    while have < n:
        piece = read(min(n - have, READ_SIZE))
        if not piece:
            raise ZSError(f"{name}: input ends inside {what} ({have} of {n} bytes present)")
        parts.append(piece)
        have += len(piece)
    return b"".join(parts)


def length_prefixed_records(file: BinaryInput, kind: str) -> Iterator[bytes]:
    """Records of a stream where each is preceded by its length as ``uleb128`` or ``u64le``."""
    name = _name(file)
    read = file.read
    unpack_from = struct.Struct("<Q").unpack_from
    buf = b""
    pos = 0
    number = 0
    while True:
        if len(buf) - pos < 16:
            # Keep at least one whole length field in the buffer unless the input ends.
            more = read(READ_SIZE)
            if not isinstance(more, bytes):
                raise ZSError(f"{name}: read() gave {type(more).__name__}, not bytes: open the input in binary mode")
            buf = buf[pos:] + more
            pos = 0
            if not buf:
                return
        number += 1
        if kind == "u64le":
            if len(buf) - pos < 8:
                raise ZSError(f"{name}: input ends inside the u64le length of record {number}")
            (length,) = unpack_from(buf, pos)
            pos += 8
        else:
            byte = buf[pos]
            if byte < 0x80:
                length = byte
                pos += 1
            else:
                try:
                    length, pos = uleb128.decode(buf, pos, f"uleb128 length of record {number}")
                except ZSError as exc:
                    raise ZSError(f"{name}: {exc}") from None
        end = pos + length
        if end <= len(buf):
            yield buf[pos:end]
            pos = end
        else:
            head = buf[pos:]
            buf, pos = b"", 0
            yield _read_rest(read, head, length, name, f"record {number}")
