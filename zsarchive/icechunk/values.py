"""User metadata values: FlexBuffers (spec V2) and MessagePack (spec V1) to JSON-compatible Python.

FlexBuffers are read by our own small decoder (format: flatbuffers.dev, "FlexBuffers"): keys and
strings are UTF-8, every offset is bounds-checked, nesting depth and total work are capped so that
any bytes decode in bounded time and memory.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from zsarchive.icechunk.flatbuf import FlatBufferError

_MAX_DEPTH = 64
"""Deepest nesting of vectors and maps accepted (JSON metadata is shallow)."""

# FlexBuffers value types (the high 6 bits of a packed type byte).
_NULL, _INT, _UINT, _FLOAT, _KEY, _STRING = 0, 1, 2, 3, 4, 5
_INDIRECT_INT, _INDIRECT_UINT, _INDIRECT_FLOAT = 6, 7, 8
_MAP, _VECTOR, _VECTOR_INT, _VECTOR_UINT, _VECTOR_FLOAT, _VECTOR_KEY, _VECTOR_STRING = 9, 10, 11, 12, 13, 14, 15
_BLOB, _BOOL, _VECTOR_BOOL = 25, 26, 36
_TYPED = {
    _VECTOR_INT: _INT,
    _VECTOR_UINT: _UINT,
    _VECTOR_FLOAT: _FLOAT,
    _VECTOR_KEY: _KEY,
    _VECTOR_STRING: _STRING,
    _VECTOR_BOOL: _BOOL,
}
_FIXED = {16 + 3 * (n - 2) + k: (n, (_INT, _UINT, _FLOAT)[k]) for n in (2, 3, 4) for k in range(3)}
_FLOATS = {4: "<f", 8: "<d"}


class _FlexReader:
    """Decodes one FlexBuffer; ``budget`` counts elements and string bytes still allowed."""

    def __init__(self, buf: bytes):
        self.buf = buf
        # Shared sub-values could otherwise make a small buffer decode to something huge.
        self.budget = 16 * len(buf) + 4096

    def uint(self, at: int, width: int) -> int:
        if width not in (1, 2, 4, 8) or at < 0 or at + width > len(self.buf):
            raise FlatBufferError(f"{width}-byte field at {at} lies outside the {len(self.buf)}-byte buffer")
        return int.from_bytes(self.buf[at : at + width], "little")

    def int(self, at: int, width: int) -> int:
        value = self.uint(at, width)
        return value - (1 << (8 * width)) if value >> (8 * width - 1) else value

    def float(self, at: int, width: int) -> float:
        if width not in _FLOATS:
            raise FlatBufferError(f"float of {width} bytes at {at}")
        self.uint(at, width)  # bounds
        return struct.unpack_from(_FLOATS[width], self.buf, at)[0]

    def target(self, at: int, width: int) -> int:
        """Where the offset stored at ``at`` points (offsets always point backwards)."""
        return at - self.uint(at, width)

    def spend(self, units: int) -> None:
        self.budget -= units
        if self.budget < 0:
            raise FlatBufferError("decodes to far more values than its size allows (shared sub-values?)")

    def text(self, start: int, end: int, what: str) -> str:
        self.spend(end - start)
        try:
            return self.buf[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FlatBufferError(f"{what} at {start} is not UTF-8 ({exc.reason})") from None

    def key(self, at: int) -> str:
        end = self.buf.find(b"\x00", at)
        if at < 0 or end < 0:
            raise FlatBufferError(f"key at {at} is not terminated inside the buffer")
        return self.text(at, end, "key")

    def sized(self, at: int, width: int, size_width: int | None = None) -> tuple[int, int]:
        """(start, length) of a string, blob or vector at ``at`` with its length in front."""
        size_width = size_width or width
        length = self.uint(at - size_width, size_width)
        if length > len(self.buf):
            raise FlatBufferError(f"length {length} at {at - size_width} exceeds the buffer")
        return at, length

    def value(self, at: int, parent_width: int, packed: int, depth: int) -> Any:
        kind, width = packed >> 2, 1 << (packed & 3)
        self.spend(1)
        if kind == _NULL:
            return None
        if kind == _INT:
            return self.int(at, parent_width)
        if kind == _UINT:
            return self.uint(at, parent_width)
        if kind == _FLOAT:
            return self.float(at, parent_width)
        if kind == _BOOL:
            return self.uint(at, parent_width) != 0
        data = self.target(at, parent_width)
        if kind == _INDIRECT_INT:
            return self.int(data, width)
        if kind == _INDIRECT_UINT:
            return self.uint(data, width)
        if kind == _INDIRECT_FLOAT:
            return self.float(data, width)
        if kind == _KEY:
            return self.key(data)
        if kind == _STRING:
            start, length = self.sized(data, width)
            if start + length >= len(self.buf):
                raise FlatBufferError(f"string at {start} runs past the buffer end")
            return self.text(start, start + length, "string")
        if kind == _BLOB:
            raise FlatBufferError(f"blob at {data} is not a JSON-compatible value")
        if depth >= _MAX_DEPTH:
            raise FlatBufferError(f"nested deeper than {_MAX_DEPTH} levels")
        if kind == _MAP:
            return self.map(data, width, depth + 1)
        if kind == _VECTOR:
            start, length = self.sized(data, width)
            types = start + length * width
            if types + length > len(self.buf):
                raise FlatBufferError(f"vector at {start} of length {length} runs past the buffer end")
            return [self.value(start + i * width, width, self.buf[types + i], depth + 1) for i in range(length)]
        if kind in _TYPED or kind in _FIXED:
            if kind in _TYPED:
                element = _TYPED[kind]
                start, length = self.sized(data, width)
            else:
                (length, element), start = _FIXED[kind], data
            if start + length * width > len(self.buf):
                raise FlatBufferError(f"vector at {start} of length {length} runs past the buffer end")
            # The deprecated string vectors store each string's length in one byte.
            packed_element = (element << 2) | (0 if element == _STRING else (packed & 3))
            return [self.value(start + i * width, width, packed_element, depth + 1) for i in range(length)]
        raise FlatBufferError(f"unknown FlexBuffers type {kind} at {at}")

    def map(self, at: int, width: int, depth: int) -> dict:
        values_start, length = self.sized(at, width)
        keys_at = self.target(at - 3 * width, width)
        keys_width = self.uint(at - 2 * width, width)
        keys_start, keys_length = self.sized(keys_at, keys_width)
        if keys_length != length:
            raise FlatBufferError(f"map at {at} has {length} values but {keys_length} keys")
        types = values_start + length * width
        if types + length > len(self.buf) or keys_start + length * keys_width > len(self.buf):
            raise FlatBufferError(f"map at {at} of length {length} runs past the buffer end")
        out: dict[str, Any] = {}
        for i in range(length):
            key = self.key(self.target(keys_start + i * keys_width, keys_width))
            if key in out:
                raise FlatBufferError(f"map at {at} holds key {key!r} twice")
            out[key] = self.value(values_start + i * width, width, self.buf[types + i], depth)
        return out


def from_flexbuffer(raw: bytes, what: str) -> Any:
    """Decode one FlexBuffers value (``what`` names it in errors)."""
    raw = bytes(raw)
    if len(raw) < 3:
        raise FlatBufferError(f"{what}: not a valid FlexBuffers value ({len(raw)} bytes is too short)")
    reader = _FlexReader(raw)
    width = raw[-1]
    try:
        return reader.value(len(raw) - 2 - width, width, raw[-2], 0)
    except FlatBufferError as exc:
        raise FlatBufferError(f"{what}: not a valid FlexBuffers value ({exc})") from None


def _jsonable(value: Any, what: str) -> Any:
    """Check a decoded value only holds JSON types (bytes, for instance, would not survive an export)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, what) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise FlatBufferError(f"{what}: map key {k!r} is not a string")
            out[k] = _jsonable(v, what)
        return out
    raise FlatBufferError(f"{what}: {type(value).__name__} is not a JSON-compatible value")


def from_msgpack(raw: bytes, what: str) -> Any:
    """Decode one MessagePack value (``what`` names it in errors)."""
    try:
        value = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FlatBufferError(f"{what}: not a valid MessagePack value ({exc})") from None
    return _jsonable(value, what)


class _FlexWriter:
    """Encodes one JSON-compatible value as FlexBuffers with every width 8 bytes: larger than the
    narrowest encoding, but any reader takes it (keys may be any UTF-8, which flatbuffers' own Python
    writer refuses)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def align(self) -> None:
        self.buf += bytes(-len(self.buf) % 8)

    def slot(self, value: Any) -> tuple[int, int | None, int]:
        """(type, inline 8-byte value or None, position of the written object) of one value."""
        if value is None:
            return _NULL, 0, 0
        if isinstance(value, bool):
            return _BOOL, int(value), 0
        if isinstance(value, int):
            if value >= 1 << 63:
                return _UINT, value, 0
            return _INT, value & ((1 << 64) - 1), 0
        if isinstance(value, float):
            return _FLOAT, struct.unpack("<Q", struct.pack("<d", value))[0], 0
        if isinstance(value, str):
            raw = value.encode("utf-8")
            self.align()
            self.buf += len(raw).to_bytes(8, "little")
            at = len(self.buf)
            self.buf += raw + b"\x00"
            return _STRING, None, at
        if isinstance(value, (list, tuple)):
            return _VECTOR, None, self.vector(list(value))
        if isinstance(value, dict):
            return _MAP, None, self.map(value)
        raise TypeError(f"cannot write {type(value).__name__} as FlexBuffers")

    def elements(self, slots: list[tuple[int, int | None, int]]) -> int:
        """Length, slots and type bytes of a vector's elements; returns where the slots start."""
        self.align()
        self.buf += len(slots).to_bytes(8, "little")
        at = len(self.buf)
        for kind, inline, target in slots:
            here = len(self.buf)
            self.buf += (inline if inline is not None else here - target).to_bytes(8, "little")
        self.buf += bytes((kind << 2) | 3 for kind, _, _ in slots)
        return at

    def vector(self, values: list) -> int:
        return self.elements([self.slot(v) for v in values])

    def map(self, value: dict) -> int:
        names = sorted(value, key=lambda k: k.encode("utf-8"))
        slots = [self.slot(value[k]) for k in names]
        keys = []
        for name in names:
            keys.append(len(self.buf))
            self.buf += name.encode("utf-8") + b"\x00"
        keys_at = self.elements([(_KEY, None, k) for k in keys])
        self.align()
        here = len(self.buf)
        self.buf += (here - keys_at).to_bytes(8, "little") + (8).to_bytes(8, "little")
        return self.elements(slots)


def to_flexbuffer(value: Any) -> bytes:
    """One JSON-compatible value as FlexBuffers (what :func:`from_flexbuffer` reads back)."""
    writer = _FlexWriter()
    kind, inline, target = writer.slot(value)
    writer.align()
    here = len(writer.buf)
    writer.buf += (inline if inline is not None else here - target).to_bytes(8, "little")
    writer.buf += bytes(((kind << 2) | 3, 8))
    return bytes(writer.buf)


def to_msgpack(value: Any) -> bytes:
    """One JSON-compatible value as MessagePack (what :func:`from_msgpack` reads back)."""
    return msgpack.packb(value, use_bin_type=True)
