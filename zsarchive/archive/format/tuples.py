"""Order-preserving, self-delimiting encoding of tuples (record keys and record values).

Each element starts with a one-byte type code and carries its own end, so a reader
splits a concatenation of elements without a schema, and the bytewise order of two
encodings equals the logical order of the tuples they encode (types compare by code,
then by value; a tuple sorts before every longer tuple it starts). The layout is
specified, byte by byte, in docs/archive-format.rst ("Tuple encoding"). Many encodings at a time:
:mod:`tuplerows <zsarchive.archive.format.tuplerows>` builds them, :mod:`tuplecolumns
<zsarchive.archive.format.tuplecolumns>` decodes them.
"""

from __future__ import annotations

from typing import Any

from zsarchive.errors import RecordFault
from zsarchive.zs.format import uleb128

Buffer = bytes | bytearray
"""What the decoders read encodings from."""
END = 0x00
BYTES = 0x01
STRING = 0x02
NONE = 0x03
BLOB = 0x04  # length-prefixed bytes: compact but NOT order-preserving, values only
TUPLE = 0x05
INT_ZERO = 0x14
INT_NEG_BIG = 0x0B  # negative, more than 8 magnitude bytes
INT_POS_BIG = 0x1D  # positive, more than 8 magnitude bytes
FALSE = 0x26
TRUE = 0x27

_ESCAPED = b"\x00\xff"


_POS_HEAD = [bytes((INT_ZERO + n,)) for n in range(9)]


def _int(value: int) -> bytes:
    if value > 0:
        size = (value.bit_length() + 7) >> 3
        if size <= 8:
            return _POS_HEAD[size] + value.to_bytes(size, "big")
        if size > 255:
            raise ValueError(f"integer too large to encode ({size} bytes)")
        return bytes((INT_POS_BIG, size)) + value.to_bytes(size, "big")
    if value == 0:
        return b"\x14"
    magnitude = -value
    size = (magnitude.bit_length() + 7) >> 3
    # Negative: ones' complement of the magnitude, so larger magnitudes sort first.
    body = ((1 << (8 * size)) - 1 - magnitude).to_bytes(size, "big")
    if size <= 8:
        return bytes((INT_ZERO - size,)) + body
    if size > 255:
        raise ValueError(f"integer too large to encode ({size} bytes)")
    return bytes((INT_NEG_BIG, 255 - size)) + body


# Chunk coordinates are mostly small: 0, then one and two magnitude bytes (as _int encodes them, built
# without a call per value: every command imports this module)
_SMALL = [
    b"\x14",
    *map(b"\x15".__add__, map(bytes, zip(range(1, 256)))),
    *((value | 0x160000).to_bytes(3, "big") for value in range(256, 1 << 12)),
]


def encode_int(value: int) -> bytes:
    """The encoding of one integer element."""
    if 0 <= value < 4096:
        return _SMALL[value]
    if 4096 <= value < 16777216:  # 2 or 3 magnitude bytes: type code and magnitude in one int
        return (value | 0x160000).to_bytes(3, "big") if value < 65536 else (value | 0x17000000).to_bytes(4, "big")
    return _int(value)


def encode_text(value: str) -> bytes:
    """The encoding of one text element."""
    return b"\x02" + value.encode("utf-8").replace(b"\x00", _ESCAPED) + b"\x00"


def _append(out: bytearray, item: Any, blobs: bool) -> None:
    kind = type(item)
    if kind is int:
        out += encode_int(item)
    elif kind is str:
        out.append(STRING)
        out += item.encode("utf-8").replace(b"\x00", _ESCAPED)
        out.append(END)
    elif kind is bytes or kind is bytearray or kind is memoryview:
        if blobs:
            out.append(BLOB)
            out += uleb128.encode(len(item))
            out += item
        else:
            out.append(BYTES)
            out += bytes(item).replace(b"\x00", _ESCAPED)
            out.append(END)
    elif kind is tuple or kind is list:
        out.append(TUPLE)
        for sub in item:
            _append(out, sub, blobs)
        out.append(END)
    elif item is None:
        out.append(NONE)
    elif kind is bool:
        out.append(TRUE if item else FALSE)
    else:
        raise TypeError(f"cannot encode {kind.__name__} in a tuple key")


def encode(items: tuple[Any, ...] | list[Any]) -> bytes:
    """Encode the elements of ``items`` one after another (no terminator: a key prefix)."""
    out = bytearray()
    for item in items:
        _append(out, item, False)
    return bytes(out)


def encode_value(items: tuple[Any, ...] | list[Any]) -> bytes:
    """Like :func:`encode`, but byte strings become length-prefixed blobs (values only)."""
    out = bytearray()
    for item in items:
        _append(out, item, True)
    return bytes(out)


def _escaped(buf: Buffer, pos: int, what: str) -> tuple[bytes, int]:
    """Read an escaped byte string starting at ``pos``; return it and the position after its END."""
    find = buf.find
    end = find(b"\x00", pos)
    if end < 0:
        raise RecordFault(f"{what}: unterminated string at position {pos}")
    if end + 1 >= len(buf) or buf[end + 1] != 0xFF:
        return bytes(buf[pos:end]), end + 1
    parts = []
    start = pos
    while True:
        if end < 0:
            raise RecordFault(f"{what}: unterminated string at position {pos}")
        if end + 1 < len(buf) and buf[end + 1] == 0xFF:
            parts.append(buf[start : end + 1])
            start = end + 2
            end = find(b"\x00", start)
            continue
        parts.append(buf[start:end])
        return b"".join(parts), end + 1


def _longer(what: str, pos: int) -> RecordFault:
    """An integer encoded in more bytes than it needs: one number would have two spellings, one key two
    records that no sorted order brings together."""
    return RecordFault(f"{what}: integer at position {pos - 1} is not in its shortest encoding")


MAX_DEPTH = 64
"""Tuples nested deeper than this are refused (the archive's records nest at most a few levels)."""


def decode(
    buf: Buffer, pos: int = 0, end: int | None = None, what: str = "key", _depth: int = 0
) -> tuple[tuple[Any, ...], int]:
    """Decode elements from ``buf[pos:]`` until an END byte (consumed) or ``end``.

    Returns ``(tuple, next_pos)``. Bytes that do not form a valid encoding (an integer in more bytes than
    it needs among them: every value has one encoding; tuples nested more than :data:`MAX_DEPTH` deep)
    raise ZSCorrupt naming ``what`` and the position.
    """
    if _depth > MAX_DEPTH:
        raise RecordFault(f"{what}: tuples nested more than {MAX_DEPTH} deep at position {pos}")
    if end is None:
        end = len(buf)
    out: list[Any] = []
    # One loop over every type code, not a function per type: this runs once per element of every
    # record a query touches, and a call per element costs more than the decoding itself.
    try:
        while pos < end:
            code = buf[pos]
            pos += 1
            if code == END:
                return tuple(out), pos
            if INT_NEG_BIG < code < INT_POS_BIG:
                size = code - INT_ZERO
                if size > 0:
                    if buf[pos] == 0:
                        raise _longer(what, pos)
                    out.append(int.from_bytes(buf[pos : pos + size], "big"))
                elif size < 0:
                    size = -size
                    if buf[pos] == 0xFF:
                        raise _longer(what, pos)
                    out.append(int.from_bytes(buf[pos : pos + size], "big") - (1 << (8 * size)) + 1)
                else:
                    out.append(0)
                pos += size
            elif code == STRING:
                raw, pos = _escaped(buf, pos, what)
                out.append(raw.decode("utf-8"))
            elif code == BYTES:
                raw, pos = _escaped(buf, pos, what)
                out.append(raw)
            elif code == TUPLE:
                sub, pos = decode(buf, pos, end, what, _depth + 1)
                out.append(sub)
            elif code == BLOB:
                size, pos = uleb128.decode(buf, pos, what)
                out.append(bytes(buf[pos : pos + size]))
                pos += size
            elif code == NONE:
                out.append(None)
            elif code == TRUE:
                out.append(True)
            elif code == FALSE:
                out.append(False)
            elif code == INT_POS_BIG:
                size = buf[pos]
                if size <= 8 or buf[pos + 1] == 0:
                    raise _longer(what, pos)
                out.append(int.from_bytes(buf[pos + 1 : pos + 1 + size], "big"))
                pos += 1 + size
            elif code == INT_NEG_BIG:
                size = 255 - buf[pos]
                if size <= 8 or buf[pos + 1] == 0xFF:
                    raise _longer(what, pos)
                out.append(int.from_bytes(buf[pos + 1 : pos + 1 + size], "big") - (1 << (8 * size)) + 1)
                pos += 1 + size
            else:
                raise RecordFault(f"{what}: unknown type code 0x{code:02x} at position {pos - 1}")
            if pos > end:
                raise RecordFault(f"{what}: element runs past the end ({end}) of its bytes")
    except (IndexError, UnicodeDecodeError) as exc:
        raise RecordFault(f"{what}: malformed encoding near position {pos}: {exc}") from None
    if _depth:
        raise RecordFault(f"{what}: nested tuple not terminated before position {end}")
    return tuple(out), pos


def element_end(buf: bytes, pos: int) -> int:
    """The position just after the element starting at ``pos`` (its END byte for a tuple), found
    without building it; ZSCorrupt if it does not end within ``buf``."""
    depth, n = 0, len(buf)
    while pos < n:
        code = buf[pos]
        pos += 1
        if INT_NEG_BIG < code < INT_POS_BIG:
            pos += abs(code - INT_ZERO)
        elif code == STRING or code == BYTES:
            end = buf.find(b"\x00", pos)
            while 0 <= end < n - 1 and buf[end + 1] == 0xFF:  # an escaped NUL, not the terminator
                end = buf.find(b"\x00", end + 2)
            if end < 0:
                break
            pos = end + 1
        elif code == TUPLE:
            depth += 1
            continue
        elif code == END and depth:
            depth -= 1
        elif code == INT_POS_BIG and pos < n:
            pos += 1 + buf[pos]
        elif code == INT_NEG_BIG and pos < n:
            pos += 1 + 255 - buf[pos]
        elif code not in (NONE, TRUE, FALSE):
            raise RecordFault(f"key {bytes(buf[:40])!r}: unknown type code 0x{code:02x} at position {pos - 1}")
        if depth == 0 and pos <= n:
            return pos
    raise RecordFault(f"key {bytes(buf[:40])!r}: element at position {pos} is not terminated")


def key_end(buf: bytes, pos: int = 1) -> int:
    """The position just after the END byte that closes the key starting at ``pos`` (a record's key
    starts at 1, after its family tag)."""
    while pos < len(buf) and buf[pos] != END:
        pos = element_end(buf, pos)
    if pos >= len(buf):
        raise RecordFault(f"key {bytes(buf[:40])!r}: not terminated")
    return pos + 1
