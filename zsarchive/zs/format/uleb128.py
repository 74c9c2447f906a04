"""Unsigned LEB128 integers, shortest form only (ZS forbids redundant encodings)."""

from __future__ import annotations

from zsarchive.errors import ZSCorrupt


def encode(value: int) -> bytes:
    """Return the shortest uleb128 encoding of a non-negative integer."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"uleb128 cannot encode negative value {value}")
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode(buf: bytes | bytearray | memoryview, pos: int = 0, what: str = "uleb128") -> tuple[int, int]:
    """Decode one uleb128 at ``buf[pos]``; return ``(value, next_pos)``.

    Raises ZSCorrupt (with the buffer position) on truncation, non-shortest form, or a value beyond
    64 bits (at most 10 bytes are read, so a long run of continuation bytes costs nothing).
    """
    try:
        byte = buf[pos]
    except IndexError:
        raise ZSCorrupt(f"{what} at position {pos}: truncated") from None
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise ZSCorrupt(f"{what} at position {start}: truncated") from None
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte == 0:
                raise ZSCorrupt(f"{what} at position {start}: not in shortest form")
            if value >> 64:
                raise ZSCorrupt(f"{what} at position {start}: more than 64 bits")
            return value, pos
        if shift >= 70:
            raise ZSCorrupt(f"{what} at position {start}: longer than the 10 bytes of a 64-bit value")
